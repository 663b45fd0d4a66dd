"""Whatever a job's fields or its processes do, the files `trainop run` writes for it stay in the run folder:
paths are resolved (symlinks too) and refused when they lead out, and nothing is written through a symlink."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trainop.local.containers import ContainerPlan
from trainop.local.errors import NotRunnableLocally
from trainop.local.kubelet import LocalPod
from trainop.local.paths import inside, open_log, write_file
from trainop.local.volumes import local_dirs, materialize

CONFIG_MAPS = {"j-config": {"data": {"hostfile": "127.0.0.1 slots=2\n"}}}


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def pod(*volumes: dict) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"volumes": list(volumes)}}


@pytest.mark.parametrize("parts", [("/etc/passwd",), ("..", "x"), ("a", "..", "..", "x")])
def test_a_path_leading_out_is_refused_naming_the_field(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(NotRunnableLocally) as err:
        inside(tmp_path / "run", *parts, field="spec.volumes[0].name")
    assert err.value.path == "spec.volumes[0].name"
    assert "outside" in err.value.detail


def test_a_symlink_leading_out_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "link").symlink_to(tmp_path)
    with pytest.raises(NotRunnableLocally):
        inside(tmp_path / "run", "link", "file", field="f")


def test_a_path_inside_is_returned_resolved(tmp_path: Path) -> None:
    assert inside(tmp_path / "run", "a", "b", field="f") == tmp_path.resolve() / "run" / "a" / "b"


def test_config_map_items_that_lead_out_write_nothing_even_unvalidated(tmp_path: Path) -> None:
    run = tmp_path / "run"
    items = [{"key": "hostfile", "path": "../../x"}]
    p = pod({"name": "cfg", "configMap": {"name": "j-config", "items": items}})
    with pytest.raises(NotRunnableLocally) as err:
        materialize(p, CONFIG_MAPS, local_dirs(p, run, "spec"), "spec")
    assert err.value.path == "spec.volumes[0].configMap.items[0].path"
    assert listing(tmp_path) == ["run", "run/cfg"]


def test_a_volume_named_like_a_path_is_refused_before_any_directory_is_made(tmp_path: Path) -> None:
    with pytest.raises(NotRunnableLocally) as err:
        local_dirs(pod({"name": "../../outside", "emptyDir": {}}), tmp_path / "run", "spec")
    assert err.value.path == "spec.volumes[0].name"
    assert listing(tmp_path) == []


def test_a_log_path_for_a_container_named_like_a_path_is_refused(tmp_path: Path) -> None:
    desired = {"metadata": {"name": "j-worker-0"}, "spec": {"containers": [{"name": "x"}]}}
    plan = ContainerPlan("../../../outside", ["true"], tmp_path, {})
    with pytest.raises(NotRunnableLocally) as err:
        LocalPod(desired, [], [plan], tmp_path / "run" / "logs", {})
    assert err.value.path == "spec.containers[0].name"
    assert listing(tmp_path) == []


def test_rewriting_a_file_replaces_a_symlink_planted_at_it_instead_of_writing_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "hostfile").symlink_to(victim)
    (folder / ".hostfile.tmp").symlink_to(victim)
    write_file(folder / "hostfile", "new\n", 0o444)
    assert victim.read_text() == "precious"
    assert not (folder / "hostfile").is_symlink()
    assert (folder / "hostfile").read_text() == "new\n"
    assert stat.S_IMODE((folder / "hostfile").stat().st_mode) == 0o444


def test_a_log_file_is_not_opened_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "c.log").symlink_to(victim)
    with pytest.raises(OSError):
        os.close(open_log(tmp_path / "c.log"))
    assert victim.read_text() == "precious"
