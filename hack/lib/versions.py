"""The release version in every file that names it: check that they agree, or write one version into all.

    python3 hack/lib/versions.py check            # exit 1, naming each file and line, unless all agree
    python3 hack/lib/versions.py set 0.2.0        # write 0.2.0 into every place below
    python3 hack/lib/versions.py current          # the version pyproject.toml holds
    python3 hack/lib/versions.py valid 0.2.0      # exit 2 with the reason unless it is a valid version

pyproject.toml's ``version`` is the source; hack/release.sh calls ``set`` before it builds anything, so
the wheel, the chart, the images and the install commands of the README all carry the version being
released, and tests/test_release_versions.py runs ``check`` on the repository as committed.

A version is ``MAJOR.MINOR.PATCH`` (no leading ``v``, no leading zeros, no pre-release suffix): the one
form that Helm (SemVer 2), pip (PEP 440 normalizes ``1.0.0-rc.1`` to ``1.0.0rc1``, so the wheel's name
would differ from the chart's) and image tags all spell the same way.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION_FORM = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_V = r"[0-9]+\.[0-9]+\.[0-9]+"


@dataclass(frozen=True)
class Place:
    """Where a file names the version: ``pattern`` has one group, the version, and matches at least once."""

    path: str
    pattern: str
    what: str

    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.MULTILINE)


PLACES: tuple[Place, ...] = (
    Place("pyproject.toml", rf'^version = "({_V})"$', "the package's version"),
    Place("trainop/__init__.py", rf'^__version__ = "({_V})"$', "`trainop --version`"),
    Place("charts/trainop/Chart.yaml", rf"^version: ({_V})$", "the chart's version"),
    Place("charts/trainop/Chart.yaml", rf'^appVersion: "({_V})"$', "the chart's appVersion (image tag)"),
    Place("charts/trainop/values.yaml", rf"^  image: trainop-tensorboard:({_V})$", "the TensorBoard image"),
    Place("trainop/extensions/tensorboard.py", rf'"trainop-tensorboard:({_V})"', "the TensorBoard image"),
    Place("docs/tensorboard.md", rf"`trainop-tensorboard:({_V})`", "the TensorBoard image"),
    Place("manifests/kustomization.yaml", rf"^  newTag: ({_V})$", "the manifests' image tag"),
    Place("manifests/hooks.yaml", rf"^ +image: trainop:({_V})$", "the hooks' image"),
    Place("manifests/webhooks.yaml", rf"^ +image: trainop:({_V})$", "the webhooks' image"),
    Place("manifests/ui/ui.yaml", rf"^ +image: trainop:({_V})$", "the UI's image"),
    Place("manifests/README.md", rf"`trainop:({_V})`", "the manifests' image"),
    Place("README.md", rf"trainop:({_V})", "the image built from a clone"),
    Place("README.md", rf"\$RELEASES/({_V})/", "a release file's address"),
    Place("README.md", rf"--version ({_V})", "the release's chart"),
    Place("README.md", rf"trainop-({_V})-py3-none-any\.whl", "the release's wheel"),
)


class VersionError(ValueError):
    pass


def validate(version: str) -> str:
    if not VERSION_FORM.match(version):
        raise VersionError(
            f"VERSION must be MAJOR.MINOR.PATCH, e.g. 0.2.0 (no leading 'v', no leading zeros, no "
            f"suffix: Helm, pip and image tags must spell it alike); got {version!r}"
        )
    return version


def current(repo: Path = REPO) -> str:
    text = (repo / "pyproject.toml").read_text()
    found = PLACES[0].regex().search(text)
    if not found:
        raise VersionError('pyproject.toml has no `version = "MAJOR.MINOR.PATCH"` line')
    return found.group(1)


def disagreements(version: str, repo: Path = REPO) -> list[str]:
    """Each place that does not name ``version``, as ``path:line: what names X``; empty when all agree."""
    out = []
    for place in PLACES:
        text = (repo / place.path).read_text()
        matches = list(place.regex().finditer(text))
        if not matches:
            out.append(f"{place.path}: {place.what} not found (pattern {place.pattern})")
        for m in matches:
            if m.group(1) != version:
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{place.path}:{line}: {place.what} names {m.group(1)}, not {version}")
    return out


def write(version: str, repo: Path = REPO) -> list[str]:
    """Write ``version`` into every place; returns the files that changed."""
    validate(version)
    changed: dict[str, str] = {}
    for place in PLACES:
        path = repo / place.path
        text = changed.get(place.path, path.read_text())
        if not place.regex().search(text):
            raise VersionError(f"{place.path}: {place.what} not found (pattern {place.pattern})")

        def put(m: re.Match[str]) -> str:
            start, end = m.span(1)
            return m.group(0)[: start - m.start()] + version + m.group(0)[end - m.start() :]

        changed[place.path] = place.regex().sub(put, text)
    written = []
    for rel, text in changed.items():
        path = repo / rel
        if path.read_text() != text:
            path.write_text(text)
            written.append(rel)
    return written


def main(argv: list[str]) -> int:
    usage = "usage: versions.py check | current | valid VERSION | set VERSION"
    try:
        if argv == ["check"]:
            problems = disagreements(current())
            for p in problems:
                print(p, file=sys.stderr)
            return 1 if problems else 0
        if argv == ["current"]:
            print(current())
            return 0
        if len(argv) == 2 and argv[0] == "valid":
            validate(argv[1])
            return 0
        if len(argv) == 2 and argv[0] == "set":
            for rel in write(argv[1]):
                print(f"wrote {argv[1]} into {rel}", file=sys.stderr)
            return 0
    except VersionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
