"""TensorBoard for a job: the annotations, what defaulting writes, and the children the hook returns."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, job, replica
from tests.controller.fakes import Cluster, by_name, names
from trainop.admission.admit import admit
from trainop.extensions.tensorboard import (
    ANNOTATION,
    ENDPOINT,
    KEEP_AFTER,
    SECRET,
    LogDir,
    parse_log_dir,
    served_log_dir,
    with_local_log_dir,
)

INDEX_ENV = {
    "name": "TRAINOP_REPLICA_INDEX",
    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['training.kubeflow.org/replica-index']"}},
}


def pytorch(annotations: dict[str, str] | None = None, name: str = "j") -> dict[str, Any]:
    out = job("PyTorchJob", name=name, Master=1, Worker=replica("PyTorchJob", 2, [container("pytorch")]))
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    return out


def admitted(obj: dict[str, Any]) -> dict[str, Any]:
    result = admit(obj)
    assert result.checks.ok, result.checks.message
    return result.job


def errors(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in admit(obj).checks.errors]


def env_of(obj: dict[str, Any], rtype: str) -> list[dict[str, Any]]:
    return obj["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["env"]


class TestLogDirectory:
    @pytest.mark.parametrize(
        ("value", "parsed"),
        [
            ("s3://experiments", LogDir("s3", "experiments")),
            ("s3://experiments/run-7/", LogDir("s3", "experiments/run-7")),
            ("gs://bucket/a/b", LogDir("gs", "bucket/a/b")),
            ("pvc://logs", LogDir("pvc", "logs")),
            ("pvc://logs/team-a/run-7", LogDir("pvc", "logs", "team-a/run-7")),
        ],
    )
    def test_each_scheme_is_understood(self, value: str, parsed: LogDir) -> None:
        assert parse_log_dir(value) == parsed

    @pytest.mark.parametrize("value", ["/mnt/logs", "hdfs://x/y", "s3://", "pvc://Logs", "pvc://logs/../etc"])
    def test_a_bad_directory_says_what_is_allowed(self, value: str) -> None:
        problem = parse_log_dir(value)
        assert isinstance(problem, str)
        assert f'"{value}"' in problem


class TestDefaulting:
    def test_every_training_container_gets_its_own_sub_directory(self) -> None:
        out = admitted(pytorch({ANNOTATION: "s3://experiments/run-7"}))
        for rtype in ("Master", "Worker"):
            env = env_of(out, rtype)
            assert INDEX_ENV in env
            assert {
                "name": "TENSORBOARD_LOG_DIR",
                "value": f"s3://experiments/run-7/{rtype.lower()}-$(TRAINOP_REPLICA_INDEX)",
            } in env

    def test_the_keep_after_default_is_written_in(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TRAINOP_TENSORBOARD_KEEP_AFTER", "24h")
        out = admitted(pytorch({ANNOTATION: "s3://experiments"}))
        assert out["metadata"]["annotations"][KEEP_AFTER] == "24h"

    def test_the_s3_endpoint_and_secret_reach_the_training_containers(self) -> None:
        out = admitted(
            pytorch({ANNOTATION: "s3://exp", ENDPOINT: "http://minio:9000", SECRET: "minio-creds"})
        )
        master = out["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        assert {"name": "S3_ENDPOINT", "value": "http://minio:9000"} in master["env"]
        assert {"name": "AWS_ENDPOINT_URL", "value": "http://minio:9000"} in master["env"]
        assert master["envFrom"] == [{"secretRef": {"name": "minio-creds"}}]

    def test_a_pvc_is_mounted_into_every_training_container(self) -> None:
        out = admitted(pytorch({ANNOTATION: "pvc://logs/run-7"}))
        spec = out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        assert spec["volumes"] == [
            {"name": "trainop-tensorboard", "persistentVolumeClaim": {"claimName": "logs"}}
        ]
        assert spec["containers"][0]["volumeMounts"] == [
            {"name": "trainop-tensorboard", "mountPath": "/var/run/trainop/tensorboard", "subPath": "run-7"}
        ]
        assert {
            "name": "TENSORBOARD_LOG_DIR",
            "value": "/var/run/trainop/tensorboard/worker-$(TRAINOP_REPLICA_INDEX)",
        } in spec["containers"][0]["env"]

    def test_admitting_twice_is_admitting_once(self) -> None:
        once = admitted(pytorch({ANNOTATION: "pvc://logs/run-7", KEEP_AFTER: "2h"}))
        assert admitted(once) == once

    def test_a_job_without_the_annotation_gets_nothing(self) -> None:
        out = admitted(pytorch())
        assert "env" not in out["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]


class TestLocalRuns:
    def test_a_local_directory_gives_every_pod_its_own_sub_directory_as_on_a_cluster(self) -> None:
        out = with_local_log_dir(admitted(pytorch()), "/runs/j/tensorboard")
        for rtype in ("Master", "Worker"):
            assert env_of(out, rtype) == [
                INDEX_ENV,
                {
                    "name": "TENSORBOARD_LOG_DIR",
                    "value": f"/runs/j/tensorboard/{rtype.lower()}-$(TRAINOP_REPLICA_INDEX)",
                },
            ]

    def test_a_local_directory_mounts_no_volume(self) -> None:
        out = with_local_log_dir(admitted(pytorch()), "/runs/j/tensorboard")
        spec = out["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        assert "volumes" not in spec and "volumeMounts" not in spec["containers"][0]

    def test_an_s3_directory_is_served_with_its_endpoint(self) -> None:
        values = {ANNOTATION: "s3://exp/run-7", ENDPOINT: "http://minio:9000"}
        assert served_log_dir(values) == (
            "s3://exp/run-7",
            {"AWS_ENDPOINT_URL": "http://minio:9000", "S3_ENDPOINT": "http://minio:9000"},
        )

    def test_a_gs_directory_is_served_as_it_is(self) -> None:
        assert served_log_dir({ANNOTATION: "gs://bucket/a"}) == ("gs://bucket/a", {})

    @pytest.mark.parametrize("values", [{}, {ANNOTATION: "pvc://logs/run-7"}], ids=["none", "pvc"])
    def test_no_directory_outside_the_cluster_is_served_without_an_object_store(
        self, values: dict[str, str]
    ) -> None:
        assert served_log_dir(values) is None


class TestValidation:
    def test_a_users_own_log_dir_variable_is_refused(self) -> None:
        obj = pytorch({ANNOTATION: "s3://exp"})
        master = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
        master["env"] = [{"name": "TENSORBOARD_LOG_DIR", "value": "/tmp"}]
        [error] = errors(obj)
        assert error.startswith("spec.pytorchReplicaSpecs[Master].template.spec.containers[0].env[0]: ")
        assert "set by trainop.dev/tensorboard" in error

    def test_an_endpoint_without_s3_is_refused(self) -> None:
        [error] = errors(pytorch({ANNOTATION: "gs://bkt", ENDPOINT: "http://minio:9000"}))
        assert error.startswith(f"metadata.annotations[{ENDPOINT}]: ")

    def test_options_without_the_directory_are_refused(self) -> None:
        [error] = errors(pytorch({KEEP_AFTER: "1h"}))
        assert (
            error == f"metadata.annotations[{KEEP_AFTER}]: Invalid value: only meaningful with {ANNOTATION}"
        )

    @pytest.mark.parametrize("keep", ["1 hour", "-1h", "1.5h", "h"])
    def test_a_bad_keep_after_is_refused(self, keep: str) -> None:
        [error] = errors(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: keep}))
        assert error.startswith(f"metadata.annotations[{KEEP_AFTER}]: ")

    def test_a_name_too_long_for_the_service_is_refused(self) -> None:
        found = errors(pytorch({ANNOTATION: "s3://exp"}, name="a" * 52))
        assert any(e.startswith("metadata.name: ") and "at most 51 characters" in e for e in found)


class TestChildren:
    def test_an_active_job_gets_a_tensorboard_deployment_and_service(self) -> None:
        cluster = Cluster(
            admitted(pytorch({ANNOTATION: "s3://exp/run", ENDPOINT: "http://minio:9000", SECRET: "c"}))
        )
        result = cluster.sync()
        deployment = by_name(result.children, "Deployment")["j-tensorboard"]
        [tb] = deployment["spec"]["template"]["spec"]["containers"]
        assert tb["args"] == [
            "--logdir=s3://exp/run",
            "--bind_all",
            "--port=6006",
            "--path_prefix=/tensorboard/default/j",
        ]
        assert tb["envFrom"] == [{"secretRef": {"name": "c"}}]
        assert {"name": "S3_ENDPOINT", "value": "http://minio:9000"} in tb["env"]
        service = by_name(result.children, "Service")["j-tensorboard"]
        assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    def test_the_tensorboard_service_selects_no_training_pod(self) -> None:
        cluster = Cluster(admitted(pytorch({ANNOTATION: "s3://exp"})))
        result = cluster.sync()
        selector = by_name(result.children, "Service")["j-tensorboard"]["spec"]["selector"]
        for pod in by_name(result.children, "Pod").values():
            labels = pod["metadata"]["labels"]
            assert not all(labels.get(k) == v for k, v in selector.items())

    def test_a_pvc_is_mounted_read_only_into_tensorboard(self) -> None:
        result = Cluster(admitted(pytorch({ANNOTATION: "pvc://logs/run-7"}))).sync()
        pod = by_name(result.children, "Deployment")["j-tensorboard"]["spec"]["template"]["spec"]
        assert pod["volumes"] == [
            {"name": "trainop-tensorboard", "persistentVolumeClaim": {"claimName": "logs", "readOnly": True}}
        ]
        assert pod["containers"][0]["args"][0] == "--logdir=/var/run/trainop/tensorboard"

    def test_tensorboard_outlives_the_job_by_keep_after_then_goes(self) -> None:
        cluster = Cluster(admitted(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: "10m"})))
        cluster.sync()
        cluster.run()
        cluster.sync()
        cluster.succeed("j-master-0")
        finished = cluster.sync()
        assert "j-tensorboard" in names(finished.children, "Deployment")
        later = cluster.sync(advance=300)
        assert "j-tensorboard" in names(later.children, "Deployment")
        assert later.resync_after_seconds is not None and later.resync_after_seconds <= 300
        gone = cluster.sync(advance=301)
        assert names(gone.children, "Deployment") == []
        assert "j-tensorboard" not in names(gone.children, "Service")

    def test_a_job_without_the_annotation_has_no_tensorboard(self) -> None:
        result = Cluster(admitted(pytorch())).sync()
        assert names(result.children, "Deployment") == []
