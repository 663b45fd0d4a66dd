"""`trainop examples`: the packaged examples listed by name, kind and description, and one printed as
YAML ready for `kubectl apply -f -`."""

from __future__ import annotations

import pytest
import yaml

from trainop.cli import main
from trainop.examples import examples


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["examples", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv", [(), ("list",)])
def test_examples_lists_every_example_with_its_kind_and_description(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, out, _ = run(capsys, *argv)
    header, *rows = out.splitlines()
    assert code == 0
    assert header.split() == ["NAME", "KIND", "DESCRIPTION"]
    assert [row.split(None, 2) for row in rows] == [[e.name, e.kind, e.description] for e in examples()]


def test_show_prints_the_config_map_then_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "pytorch")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", "pytorch-dist-digits-script"),
        ("PyTorchJob", "pytorch-dist-digits"),
    ]


def test_show_of_an_unknown_name_fails_listing_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "show", "pytorh")
    assert (code, out) == (2, "")
    assert err == (
        "error: no example named 'pytorh'; did you mean \"pytorch\"?; "
        f"the examples are: {', '.join(e.name for e in examples())}\n"
    )
