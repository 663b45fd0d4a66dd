"""ConfigMaps that come in the job's own file: pods mount them from the start, and the hook never sees
them as children of the job (on a cluster they are not the job's: `kubectl apply` made them)."""

from __future__ import annotations

import os
from pathlib import Path

from trainop.frameworks import kind_info
from trainop.local.cluster import LocalCluster

SCRIPT = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scripts"}, "data": {"a.py": "x\n"}}


def cluster(tmp_path: Path) -> LocalCluster:
    return LocalCluster(
        kind_info("PyTorchJob"),
        tmp_path,
        tmp_path / "run",
        dict(os.environ),
        1.0,
        given_config_maps={"scripts": SCRIPT},
    )


def test_a_config_map_of_the_file_is_mountable_before_any_sync(tmp_path: Path) -> None:
    assert cluster(tmp_path).config_maps() == {"scripts": SCRIPT}


def test_a_config_map_of_the_file_is_not_observed_as_a_child(tmp_path: Path) -> None:
    assert "ConfigMap.v1" not in cluster(tmp_path).observed()


def test_the_operators_config_map_of_the_same_name_is_the_one_pods_get(tmp_path: Path) -> None:
    local = cluster(tmp_path)
    mine = {**SCRIPT, "data": {"hostfile": "127.0.0.1 slots=1\n"}}
    local.apply([mine], 0.0)
    assert local.config_maps()["scripts"]["data"] == mine["data"]
