"""The chart hands the extensions' cluster settings to both servers alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.install.test_manifests import find, render
from trainop import __version__
from trainop.extensions.tensorboard import TensorBoard
from trainop.install import manifests
from trainop.jsontypes import Json


def server_env(rendered: list[Json], name: str) -> dict[str, str]:
    [deployment] = [d for d in find(rendered, "Deployment") if d["metadata"]["name"] == name]
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if "env" in c][:1]
    return {e["name"]: e.get("value", "") for e in container["env"]}


@pytest.mark.parametrize("server", [manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME])
def test_placement_defaults_and_tensorboard_settings_reach_both_servers(
    helm: tuple[str, Path],
    server: str,
) -> None:
    rendered = render(
        helm,
        "placement.defaults.PS=spread-preferred",
        "placement.defaults.Worker=pack:topology.kubernetes.io/zone",
        "tensorboard.keepAfter=24h",
    )
    env = server_env(rendered, server)
    assert env["TRAINOP_PLACEMENT_DEFAULTS"] == "PS=spread-preferred,Worker=pack:topology.kubernetes.io/zone"
    assert env["TRAINOP_TENSORBOARD_KEEP_AFTER"] == "24h"
    assert env["TRAINOP_TENSORBOARD_IMAGE"] == f"trainop-tensorboard:{__version__}"


@pytest.mark.parametrize("server", [manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME])
def test_tensorboard_ingress_peers_reach_both_servers_as_json(helm: tuple[str, Path], server: str) -> None:
    rendered = render(
        helm,
        "tensorboard.ingressFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=ingress",
    )
    peers = json.loads(server_env(rendered, server)["TRAINOP_TENSORBOARD_INGRESS_FROM"])
    assert peers == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}]
    TensorBoard().check_settings(server_env(rendered, server))


def test_by_default_no_pod_may_reach_a_tensorboard(helm: tuple[str, Path]) -> None:
    assert server_env(render(helm), manifests.HOOKS_NAME)["TRAINOP_TENSORBOARD_INGRESS_FROM"] == "[]"


def test_by_default_no_placement_default_is_set(helm: tuple[str, Path]) -> None:
    assert server_env(render(helm), manifests.HOOKS_NAME)["TRAINOP_PLACEMENT_DEFAULTS"] == ""
