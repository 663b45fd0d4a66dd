"""README.md's table of `trainop.dev/` annotations, rendered from the registry in trainop.extensions.

python hack/annotations.py --write-readme   # rewrite the block
python hack/annotations.py                  # exit 1 when the block is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainop.extensions import README_BEGIN, README_END, readme_table  # noqa: E402

README = REPO / "README.md"


def readme_block(text: str) -> str:
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"{README.name} has no generated block between {README_BEGIN!r} and {README_END!r}")
    return text[start : end + len(README_END)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-readme", action="store_true", help="rewrite README.md's generated block")
    args = parser.parse_args(argv)
    text = README.read_text()
    current = readme_block(text) == readme_table()
    if args.write_readme:
        if not current:
            README.write_text(text.replace(readme_block(text), readme_table()))
        print(f"{README}: {'already up to date' if current else 'updated'}")
        return 0
    print(f"README annotation table {'matches' if current else 'is stale: run with --write-readme'}")
    return 0 if current else 1


if __name__ == "__main__":
    sys.exit(main())
