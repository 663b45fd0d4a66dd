"""The list of deliberate differences from Kubeflow (docs/deliberate-differences.yaml) and its two uses.

1. The differential test accepts a difference only when an entry's ``match`` selector names it.
2. README.md's "Deliberate differences" block is rendered from the list (``--write-readme``) and a
   unit test checks that it is.

Format: a YAML list of entries ::

    - id: mpi-failed-reason            # unique, [a-z0-9-]
      what: one sentence a user can read
      kubeflow: what Kubeflow does
      trainop: what we do
      why: why ours is deliberate
      match:                           # optional: how tests/differential recognises it
        - path: "job.status.conditions[Failed].reason"   # glob ('*' only) over the path (required)
          case: "mpi-*"                # glob over case ids (default "*")
          checkpoint: "*"              # glob over checkpoint labels (default "*")
          kubeflow: MPIJobMPIJobFailed # the exact Kubeflow value (optional)
          trainop: MPIJobFailed        # the exact value on our side (optional)

An entry without ``match`` is a difference the differential run cannot see (admission strictness,
persisted defaults); it is still rendered into the README. A selector must be precise: ``*`` is its
only wildcard (brackets are literal), its path must not start with one, and a path with one needs a
case or a value besides.

Run ``python tests/differential/deliberate.py --write-readme`` after editing the list.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
LIST_PATH = REPO / "docs" / "deliberate-differences.yaml"
README = REPO / "README.md"
BEGIN = "<!-- BEGIN deliberate-differences: generated from docs/deliberate-differences.yaml -->"
END = "<!-- END deliberate-differences -->"
FIELDS = ("id", "what", "kubeflow", "trainop", "why")
UNSET = object()


class ListError(ValueError):
    pass


def glob(pattern: str, text: str) -> bool:
    """``*`` matches any run of characters; everything else, brackets included, is literal."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, text, re.DOTALL) is not None


@dataclass(frozen=True)
class Selector:
    path: str
    case: str = "*"
    checkpoint: str = "*"
    kubeflow: Any = UNSET
    trainop: Any = UNSET

    def matches(self, case: str, checkpoint: str, path: str, kubeflow: Any, trainop: Any) -> bool:
        return (
            glob(self.path, path)
            and glob(self.case, case)
            and glob(self.checkpoint, checkpoint)
            and (self.kubeflow is UNSET or self.kubeflow == kubeflow)
            and (self.trainop is UNSET or self.trainop == trainop)
        )


@dataclass(frozen=True)
class Entry:
    id: str
    what: str
    kubeflow: str
    trainop: str
    why: str
    match: tuple[Selector, ...] = ()


def _selector(entry_id: str, n: int, raw: Any) -> Selector:
    where = f"entry {entry_id!r}, match[{n}]"
    if not isinstance(raw, dict):
        raise ListError(f"{where}: must be a mapping with at least 'path'")
    unknown = set(raw) - {"path", "case", "checkpoint", "kubeflow", "trainop"}
    if unknown:
        raise ListError(f"{where}: unknown keys {sorted(unknown)}")
    path = raw.get("path")
    if not isinstance(path, str) or not path:
        raise ListError(f"{where}: 'path' is required (a glob over difference paths)")
    if path.startswith("*"):
        raise ListError(f"{where}: path {path!r} starts with a wildcard; name what differs")
    sel = Selector(
        path=path,
        case=str(raw.get("case", "*")),
        checkpoint=str(raw.get("checkpoint", "*")),
        kubeflow=raw.get("kubeflow", UNSET),
        trainop=raw.get("trainop", UNSET),
    )
    if "*" in path and sel.case == "*" and sel.kubeflow is UNSET and sel.trainop is UNSET:
        raise ListError(
            f"{where}: path {path!r} has a wildcard; add a 'case' or a 'kubeflow'/'trainop' value"
        )
    return sel


def parse(data: Any) -> list[Entry]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ListError("the deliberate-differences list must be a YAML list of entries")
    entries: list[Entry] = []
    for n, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise ListError(f"entry #{n}: must be a mapping with keys {list(FIELDS)}")
        missing = [f for f in FIELDS if not isinstance(raw.get(f), str) or not raw[f].strip()]
        if missing:
            raise ListError(f"entry #{n} ({raw.get('id', 'no id')}): missing or empty {missing}")
        unknown = set(raw) - {*FIELDS, "match"}
        if unknown:
            raise ListError(f"entry {raw['id']!r}: unknown keys {sorted(unknown)}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", raw["id"]):
            raise ListError(f"entry {raw['id']!r}: id must be lower-case letters, digits and '-'")
        selectors = raw.get("match") or []
        if not isinstance(selectors, list):
            raise ListError(f"entry {raw['id']!r}: 'match' must be a list of selectors")
        entries.append(
            Entry(
                **{f: raw[f].strip() for f in FIELDS},
                match=tuple(_selector(raw["id"], i, s) for i, s in enumerate(selectors)),
            )
        )
    ids = [e.id for e in entries]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ListError(f"duplicate ids: {dupes}")
    return entries


def load(path: Path = LIST_PATH) -> list[Entry]:
    if not path.exists():
        return []
    try:
        return parse(yaml.safe_load(path.read_text()))
    except ListError as e:
        raise ListError(f"{path}: {e}") from None


def explain(
    entries: list[Entry], case: str, checkpoint: str, path: str, kubeflow: Any, trainop: Any
) -> str | None:
    """The id of the first entry whose selector matches this difference, or None."""
    for entry in entries:
        if any(s.matches(case, checkpoint, path, kubeflow, trainop) for s in entry.match):
            return entry.id
    return None


# ---------------------------------------------------------------------------------------------- README
def _one_line(text: str) -> str:
    """One Markdown line; ``<`` escaped so ``<Kind>`` is not read as an HTML tag."""
    return " ".join(text.split()).replace("<", "&lt;")


def render(entries: list[Entry]) -> str:
    """The README block, markers included."""
    lines = [BEGIN]
    if not entries:
        lines.append("None.")
    for e in entries:
        lines.append(
            f"* **{_one_line(e.what)}** Kubeflow: {_one_line(e.kubeflow)} trainop: {_one_line(e.trainop)} "
            f"Why: {_one_line(e.why)} (`{e.id}`)"
        )
    lines.append(END)
    return "\n".join(lines)


def readme_block(text: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ListError(f"{README.name} has no generated block between {BEGIN!r} and {END!r}")
    return text[start : end + len(END)]


def write_readme(entries: list[Entry], readme: Path = README) -> bool:
    """Replace the README block; True when the file changed."""
    text = readme.read_text()
    new = text.replace(readme_block(text), render(entries))
    if new == text:
        return False
    readme.write_text(new)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-readme", action="store_true", help="rewrite README.md's generated block")
    args = parser.parse_args(argv)
    entries = load()
    if args.write_readme:
        changed = write_readme(entries)
        print(f"{README}: {'updated' if changed else 'already up to date'} ({len(entries)} entries)")
        return 0
    ok = readme_block(README.read_text()) == render(entries)
    print(f"{len(entries)} entries; README block {'matches' if ok else 'is stale: run with --write-readme'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
