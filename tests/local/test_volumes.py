"""Pod volumes locally: the job's own ConfigMaps become files, with the modes and paths the volume asks
for; volumes that need a cluster are errors naming the field."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from trainop.local.errors import NotRunnableLocally
from trainop.local.volumes import ConfigMapNotReady, local_dirs, materialize

CONFIG_MAPS = {
    "j-config": {"data": {"hostfile": "127.0.0.1 slots=2\n", "kubexec.sh": "#!/bin/sh\n", "other": "x"}}
}


def pod(*volumes: dict) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"volumes": list(volumes)}}


def test_config_map_items_are_written_with_their_paths_and_modes(tmp_path: Path) -> None:
    items = [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
        {"key": "kubexec.sh", "path": "bin/exec.sh", "mode": 0o555},
    ]
    p = pod({"name": "cfg", "configMap": {"name": "j-config", "items": items}})
    dirs = local_dirs(p, tmp_path, "spec")
    materialize(p, CONFIG_MAPS, dirs, "spec")
    assert (dirs["cfg"] / "hostfile").read_text() == "127.0.0.1 slots=2\n"
    assert stat.S_IMODE((dirs["cfg"] / "hostfile").stat().st_mode) == 0o444
    assert stat.S_IMODE((dirs["cfg"] / "bin/exec.sh").stat().st_mode) == 0o555
    assert not (dirs["cfg"] / "other").exists()
    # Written again (a changed ConfigMap) even though the files are read-only.
    materialize(p, {"j-config": {"data": {"hostfile": "new\n", "kubexec.sh": ""}}}, dirs, "spec")
    assert (dirs["cfg"] / "hostfile").read_text() == "new\n"


def test_without_items_every_key_is_a_file(tmp_path: Path) -> None:
    p = pod({"name": "cfg", "configMap": {"name": "j-config"}})
    dirs = local_dirs(p, tmp_path, "spec")
    materialize(p, CONFIG_MAPS, dirs, "spec")
    assert sorted(f.name for f in dirs["cfg"].iterdir()) == ["hostfile", "kubexec.sh", "other"]


def test_a_config_map_that_does_not_exist_yet_holds_the_pod(tmp_path: Path) -> None:
    p = pod({"name": "cfg", "configMap": {"name": "later"}})
    with pytest.raises(ConfigMapNotReady):
        materialize(p, CONFIG_MAPS, local_dirs(p, tmp_path, "spec"), "spec")


def test_empty_dirs_are_made_and_host_paths_used_as_they_are(tmp_path: Path) -> None:
    p = pod({"name": "scratch", "emptyDir": {}}, {"name": "data", "hostPath": {"path": "/tmp"}})
    dirs = local_dirs(p, tmp_path, "spec")
    materialize(p, {}, dirs, "spec")
    assert dirs["scratch"].is_dir() and dirs["data"] == Path("/tmp")


@pytest.mark.parametrize("source", ["secret", "persistentVolumeClaim", "nfs"])
def test_volumes_that_need_a_cluster_are_errors_naming_the_field(tmp_path: Path, source: str) -> None:
    with pytest.raises(NotRunnableLocally) as err:
        local_dirs(pod({"name": "x", source: {}}), tmp_path, "spec.tfReplicaSpecs[PS].template.spec")
    assert err.value.path == f"spec.tfReplicaSpecs[PS].template.spec.volumes[0].{source}"
