"""The chart's JSON-logs default reaches both servers, which read it when they default a job
(docs/json-logs.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.install.test_manifests import render
from trainop.extensions.jsonlogs.extension import DEFAULT_ENV


def server_defaults(helm: tuple[str, Path], *settings: str) -> dict[str, str]:
    """{Deployment name: its TRAINOP_DEFAULT_LOG_FORMAT}."""
    out = {}
    for doc in render(helm, *settings):
        if doc["kind"] == "Deployment":
            env = {e["name"]: e.get("value") for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]}
            out[doc["metadata"]["name"]] = env[DEFAULT_ENV]
    return out


def test_the_default_is_text(helm: tuple[str, Path]) -> None:
    assert server_defaults(helm) == {"trainop-hooks": "text", "trainop-webhooks": "text"}


@pytest.mark.parametrize("value", ["json", "text"])
def test_the_value_reaches_the_hooks_and_the_webhooks(helm: tuple[str, Path], value: str) -> None:
    assert server_defaults(helm, f"logging.trainingProcesses.format={value}") == {
        "trainop-hooks": value,
        "trainop-webhooks": value,
    }
