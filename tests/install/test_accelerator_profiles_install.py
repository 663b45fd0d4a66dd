"""The accelerator profiles reach both servers: the chart's ConfigMap and mounts, and the kustomize
component's. (The `helm` and `kubectl` fixtures put these tests in the e2e tier.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.install.test_manifests import MANIFESTS, Loader, find, kubectl, pod_spec, render
from trainop.extensions.accelerators import PROFILES_ENV, builtin_profiles_text
from trainop.install import manifests
from trainop.jsontypes import Json

__all__ = ["kubectl"]  # a fixture

SERVERS = (manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME)


def profiles_reach(docs: list[Json], deployment: str) -> Json:
    """The profiles the server of `deployment` reads: follow its env to the mount, the volume and the
    ConfigMap."""
    spec = pod_spec(docs, deployment)
    [container] = spec["containers"]
    path = Path(next(e["value"] for e in container["env"] if e["name"] == PROFILES_ENV))
    [mount] = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    [config] = find(docs, "ConfigMap", volume["configMap"]["name"])
    profiles: Json = yaml.safe_load(config["data"][path.name])
    return profiles


def test_the_chart_gives_both_servers_the_default_profiles(helm: tuple[str, Path]) -> None:
    docs = render(helm)

    for name in SERVERS:
        assert profiles_reach(docs, name) == yaml.safe_load(builtin_profiles_text())


def test_the_charts_profiles_are_replaced_by_the_values(helm: tuple[str, Path]) -> None:
    docs = render(helm, "accelerators.profiles.lab.resource=nvidia.com/gpu")

    assert profiles_reach(docs, manifests.WEBHOOKS_NAME)["lab"] == {"resource": "nvidia.com/gpu"}


def test_the_kustomize_component_gives_both_servers_its_profiles(kubectl: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(MANIFESTS, site)],
                "components": [os.path.relpath(MANIFESTS / "components" / "accelerators", site)],
            }
        )
    )
    result = subprocess.run(
        [kubectl, "kustomize", str(site)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.load_all(result.stdout, Loader=Loader) if d is not None]

    for name in SERVERS:
        assert profiles_reach(docs, name) == yaml.safe_load(builtin_profiles_text())
