"""The chart's default-parameter-server switch reaches both servers, which read it when they default a
TFJob (docs/parameter-server.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.install.test_extension_chart import server_env
from tests.install.test_manifests import render
from trainop.extensions.parameterserver import DEFAULT_ENV, configured_default
from trainop.install import manifests


@pytest.mark.parametrize("server", [manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME])
def test_by_default_it_is_off_in_both_servers(helm: tuple[str, Path], server: str) -> None:
    value = server_env(render(helm), server)[DEFAULT_ENV]
    assert configured_default({DEFAULT_ENV: value}) is False


@pytest.mark.parametrize("server", [manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME])
def test_turned_on_it_reaches_both_servers(helm: tuple[str, Path], server: str) -> None:
    value = server_env(render(helm, "tensorflow.defaultParameterServer=true"), server)[DEFAULT_ENV]
    assert configured_default({DEFAULT_ENV: value}) is True
