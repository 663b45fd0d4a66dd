"""How a container's command, working directory and environment are resolved for a local process,
following kubelet's rules wherever a local run can, and naming the field wherever it cannot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainop.jsontypes import Json
from trainop.local.containers import PodSite, expand, plan_container, plan_pod, remap, resolve_env
from trainop.local.errors import NotRunnableLocally

PATH = "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0]"


def pod(**container: Any) -> Json:
    return {
        "metadata": {
            "name": "j-worker-1",
            "namespace": "team-a",
            "uid": "uid-1",
            "labels": {"training.kubeflow.org/replica-index": "1"},
            "annotations": {"note": "hello"},
        },
        "spec": {"containers": [{"name": "pytorch", "command": ["python3"], **container}]},
    }


def env_of(p: Json, tmp_path: Path) -> dict[str, str]:
    return resolve_env(p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path), PATH)


def value_from(source: Json) -> Json:
    return pod(env=[{"name": "X", "valueFrom": source}])


class TestEnvironment:
    def test_plain_values_are_kept_in_order(self, tmp_path: Path) -> None:
        p = pod(env=[{"name": "A", "value": "1"}, {"name": "B", "value": ""}, {"name": "C"}])
        assert list(env_of(p, tmp_path).items()) == [("A", "1"), ("B", ""), ("C", "")]

    @pytest.mark.parametrize(
        ("field_path", "expected"),
        [
            ("metadata.name", "j-worker-1"),
            ("metadata.namespace", "team-a"),
            ("metadata.uid", "uid-1"),
            ("metadata.labels['training.kubeflow.org/replica-index']", "1"),
            ("metadata.annotations['note']", "hello"),
            ("metadata.labels['absent']", ""),
            ("status.podIP", "127.0.0.1"),
            ("status.hostIP", "127.0.0.1"),
            ("spec.serviceAccountName", "default"),
        ],
    )
    def test_field_refs_to_the_pod_itself_resolve(
        self, tmp_path: Path, field_path: str, expected: str
    ) -> None:
        assert env_of(value_from({"fieldRef": {"fieldPath": field_path}}), tmp_path) == {"X": expected}

    def test_an_unknown_field_ref_names_the_field(self, tmp_path: Path) -> None:
        with pytest.raises(NotRunnableLocally) as err:
            env_of(value_from({"fieldRef": {"fieldPath": "metadata.generation"}}), tmp_path)
        assert err.value.path == f"{PATH}.env[0].valueFrom.fieldRef.fieldPath"
        assert "metadata.generation" in str(err.value)

    @pytest.mark.parametrize(
        "source",
        [
            {"secretKeyRef": {"name": "s", "key": "k"}},
            {"configMapKeyRef": {"name": "c", "key": "k"}},
            {"resourceFieldRef": {"resource": "limits.cpu"}},
        ],
    )
    def test_references_that_need_a_cluster_are_errors_naming_the_field(
        self, tmp_path: Path, source: Json
    ) -> None:
        kind = next(iter(source))
        with pytest.raises(NotRunnableLocally) as err:
            env_of(value_from(source), tmp_path)
        assert str(err.value).startswith(f"{PATH}.env[0].valueFrom.{kind}: {kind} needs a cluster")

    def test_env_from_needs_a_cluster(self, tmp_path: Path) -> None:
        with pytest.raises(NotRunnableLocally) as err:
            env_of(pod(envFrom=[{"secretRef": {"name": "s"}}]), tmp_path)
        assert err.value.path == f"{PATH}.envFrom[0].secretRef"

    def test_values_refer_to_variables_defined_before_them(self, tmp_path: Path) -> None:
        p = pod(
            env=[
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "MASTER", "value": "$(IP):2222"},
                {"name": "EARLY", "value": "$(LATE)"},
                {"name": "LATE", "value": "x"},
            ]
        )
        env = env_of(p, tmp_path)
        assert env["MASTER"] == "127.0.0.1:2222"
        assert env["EARLY"] == "$(LATE)"


class TestExpansion:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("$(A)-$(B)", "1-two"),
            ("$(MISSING)", "$(MISSING)"),
            ("$$(A)", "$(A)"),
            ("$$", "$"),
            ("cost: $5", "cost: $5"),
            ("$(A", "$(A"),
            ("end$", "end$"),
            ("$(A)$(A)", "11"),
        ],
    )
    def test_like_kubernetes(self, value: str, expected: str) -> None:
        assert expand(value, {"A": "1", "B": "two"}) == expected


class TestCommand:
    def test_command_and_args_are_expanded_with_the_container_env(self, tmp_path: Path) -> None:
        p = pod(args=["train.py", "--rank=$(RANK)", "$(NOPE)"], env=[{"name": "RANK", "value": "2"}])
        plan = plan_container(p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path), PATH)
        assert plan.argv == ["python3", "train.py", "--rank=2", "$(NOPE)"]
        assert plan.env == {"RANK": "2"}

    def test_a_container_without_command_cannot_run_locally(self, tmp_path: Path) -> None:
        p = pod(command=None, args=["train.py"])
        with pytest.raises(NotRunnableLocally) as err:
            plan_container(p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path), PATH)
        assert err.value.path == f"{PATH}.command"
        assert "local runs" in str(err.value)

    def test_init_containers_and_containers_are_planned_with_their_own_paths(self, tmp_path: Path) -> None:
        p = pod()
        p["spec"]["initContainers"] = [{"name": "prep", "command": ["true"]}, {"name": "bad"}]
        with pytest.raises(NotRunnableLocally) as err:
            plan_pod(p, PodSite(base_dir=tmp_path), "spec.x[Worker].template.spec")
        assert err.value.path == "spec.x[Worker].template.spec.initContainers[1].command"


class TestWorkingDirectory:
    def plan_cwd(self, tmp_path: Path, **container: Any) -> Path:
        p = pod(**container)
        return plan_container(p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path), PATH).cwd

    def test_unset_means_the_folder_of_the_yaml(self, tmp_path: Path) -> None:
        assert self.plan_cwd(tmp_path) == tmp_path

    def test_relative_is_resolved_against_the_folder_of_the_yaml(self, tmp_path: Path) -> None:
        (tmp_path / "src").mkdir()
        assert self.plan_cwd(tmp_path, workingDir="src") == tmp_path / "src"

    def test_a_directory_missing_here_is_an_error_naming_the_field(self, tmp_path: Path) -> None:
        with pytest.raises(NotRunnableLocally) as err:
            self.plan_cwd(tmp_path, workingDir="/workspace-that-is-not-here")
        assert err.value.path == f"{PATH}.workingDir"
        assert "leave workingDir unset" in err.value.detail


class TestMounts:
    def test_paths_under_a_mount_point_move_to_the_volume_folder(self, tmp_path: Path) -> None:
        volume = tmp_path / "vol"
        volume.mkdir()
        p = pod(
            args=["--hostfile", "/etc/mpi/hostfile"],
            env=[{"name": "AGENT", "value": "/etc/mpi/kubexec.sh"}, {"name": "OTHER", "value": "/etc/mpix"}],
            volumeMounts=[{"name": "cfg", "mountPath": "/etc/mpi"}],
            workingDir="/etc/mpi",
        )
        site = PodSite(base_dir=tmp_path, volumes={"cfg": volume})
        plan = plan_container(p, p["spec"]["containers"][0], site, PATH)
        assert plan.argv[-1] == f"{volume}/hostfile"
        assert plan.env == {"AGENT": f"{volume}/kubexec.sh", "OTHER": "/etc/mpix"}
        assert plan.cwd == volume

    def test_a_mount_of_an_undeclared_volume_is_an_error(self, tmp_path: Path) -> None:
        p = pod(volumeMounts=[{"name": "data", "mountPath": "/data"}])
        with pytest.raises(NotRunnableLocally) as err:
            plan_container(p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path), PATH)
        assert err.value.path == f"{PATH}.volumeMounts[0].name"

    def test_only_whole_path_prefixes_move(self) -> None:
        mounts = {"/a": Path("/x"), "/a/b": Path("/y")}
        assert remap("/a/b/c", mounts) == "/y/c"
        assert remap("/a/c", mounts) == "/x/c"
        assert remap("/ab", mounts) == "/ab"

    def test_sub_path_expr_is_expanded_with_the_container_env(self, tmp_path: Path) -> None:
        p = pod(
            args=["/out/result.json"],
            env=[{"name": "POD", "value": "j-worker-1"}],
            volumeMounts=[{"name": "out", "mountPath": "/out", "subPathExpr": "runs/$(POD)"}],
        )
        site = PodSite(base_dir=tmp_path, volumes={"out": tmp_path / "vol"})
        plan = plan_container(p, p["spec"]["containers"][0], site, PATH)
        assert plan.argv[-1] == f"{tmp_path / 'vol' / 'runs' / 'j-worker-1'}/result.json"

    def test_a_sub_path_through_a_symlink_out_of_the_volume_is_refused(self, tmp_path: Path) -> None:
        volume = tmp_path / "vol"
        volume.mkdir()
        (volume / "escape").symlink_to("/etc")
        p = pod(volumeMounts=[{"name": "cfg", "mountPath": "/cfg", "subPath": "escape"}])
        site = PodSite(base_dir=tmp_path, volumes={"cfg": volume})
        with pytest.raises(NotRunnableLocally) as err:
            plan_container(p, p["spec"]["containers"][0], site, PATH)
        assert err.value.path == f"{PATH}.volumeMounts[0].subPath"

    def test_each_entry_of_a_path_list_variable_moves(self, tmp_path: Path) -> None:
        volume = tmp_path / "volumes" / "lib"
        p = pod(
            volumeMounts=[{"name": "lib", "mountPath": "/opt/lib"}],
            env=[{"name": "PYTHONPATH", "value": "/opt/lib:/app:/opt/lib/extra"}],
        )
        plan = plan_container(
            p, p["spec"]["containers"][0], PodSite(base_dir=tmp_path, volumes={"lib": volume}), PATH
        )
        assert plan.env == {"PYTHONPATH": f"{volume}:/app:{volume}/extra"}
