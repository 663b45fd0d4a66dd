"""TensorBoard for a job: the annotations, what defaulting writes, and the children the hook returns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.builders import container, job, replica, with_run_policy
from tests.controller.fakes import Cluster, by_name, names
from trainop.admission.admit import admit
from trainop.envvalues import SettingError
from trainop.extensions.tensorboard import (
    ANNOTATION,
    ENDPOINT,
    INGRESS_FROM,
    INGRESS_FROM_ENV,
    KEEP_AFTER,
    KEEP_AFTER_ENV,
    SECRET,
    LogDir,
    TensorBoard,
    parse_log_dir,
    served_log_dir,
    with_local_log_dir,
)

INGRESS_NGINX = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}},
}

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


class TestSuspension:
    def test_a_suspended_job_gets_no_tensorboard_deployment(self) -> None:
        result = Cluster(admitted(with_run_policy(pytorch({ANNOTATION: "s3://exp"}), suspend=True))).sync()
        assert names(result.children, "Deployment") == []

    def test_a_suspended_job_keeps_its_tensorboard_service_and_network_policy(self) -> None:
        result = Cluster(admitted(with_run_policy(pytorch({ANNOTATION: "s3://exp"}), suspend=True))).sync()
        assert "j-tensorboard" in names(result.children, "Service")
        assert names(result.children, "NetworkPolicy") == ["j-tensorboard"]

    def test_suspending_a_running_job_takes_its_tensorboard_deployment_away(self) -> None:
        cluster = Cluster(admitted(pytorch({ANNOTATION: "s3://exp"})))
        cluster.sync()
        cluster.run()
        assert "j-tensorboard" in names(cluster.sync().children, "Deployment")
        cluster.edit(suspend=True)
        assert names(cluster.sync().children, "Deployment") == []

    def test_resuming_a_job_brings_its_tensorboard_deployment_back(self) -> None:
        cluster = Cluster(admitted(with_run_policy(pytorch({ANNOTATION: "s3://exp"}), suspend=True)))
        cluster.sync()
        cluster.edit(suspend=False)
        assert names(cluster.sync().children, "Deployment") == ["j-tensorboard"]

    def test_a_finished_job_keeps_its_tensorboard_for_keep_after_even_when_suspended(self) -> None:
        cluster = Cluster(admitted(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: "10m"})))
        cluster.sync()
        cluster.run()
        cluster.sync()
        cluster.succeed("j-master-0")
        cluster.sync()
        cluster.edit(suspend=True)
        assert names(cluster.sync(advance=60).children, "Deployment") == ["j-tensorboard"]


class TestKeepAfterBound:
    def test_a_keep_after_beyond_30_days_is_refused_with_the_bound_and_the_fix(self) -> None:
        [error] = errors(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: "999999d"}))
        assert error == (
            f'metadata.annotations[{KEEP_AFTER}]: Invalid value: "999999d": at most 30d (720h): '
            'TensorBoard holds a pod for that long after the job; give a shorter one, e.g. "7d"'
        )

    @pytest.mark.parametrize("keep", ["30d", "720h", "43200m"])
    def test_a_keep_after_of_30_days_is_accepted(self, keep: str) -> None:
        assert errors(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: keep})) == []

    def test_a_keep_after_one_minute_beyond_30_days_is_refused(self) -> None:
        [error] = errors(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: "43201m"}))
        assert "at most 30d" in error

    def test_a_malformed_keep_after_says_what_the_form_is(self) -> None:
        [error] = errors(pytorch({ANNOTATION: "s3://exp", KEEP_AFTER: "1 week"}))
        assert error == (
            f'metadata.annotations[{KEEP_AFTER}]: Invalid value: "1 week": '
            'a whole number with s, m, h or d, e.g. "24h" or "0s"'
        )

    def test_a_cluster_default_beyond_30_days_stops_the_servers(self) -> None:
        with pytest.raises(SettingError, match=rf"^{KEEP_AFTER_ENV}: expected at most 30d .*, got '31d'$"):
            TensorBoard().check_settings({KEEP_AFTER_ENV: "31d"})

    def test_a_cluster_default_of_30_days_is_accepted(self) -> None:
        TensorBoard().check_settings({KEEP_AFTER_ENV: "30d"})


class TestNetworkPolicy:
    def policy(self, job: dict[str, Any]) -> dict[str, Any]:
        result = Cluster(admitted(job)).sync()
        policy: dict[str, Any] = by_name(result.children, "NetworkPolicy")["j-tensorboard"]
        return policy

    def test_the_policy_selects_the_tensorboard_pods(self) -> None:
        result = Cluster(admitted(pytorch({ANNOTATION: "s3://exp"}))).sync()
        policy = by_name(result.children, "NetworkPolicy")["j-tensorboard"]
        deployment = by_name(result.children, "Deployment")["j-tensorboard"]
        assert policy["apiVersion"] == "networking.k8s.io/v1"
        assert policy["spec"]["podSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}

    def test_without_configured_peers_the_policy_admits_no_ingress(self) -> None:
        spec = self.policy(pytorch({ANNOTATION: "s3://exp"}))["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        assert "ingress" not in spec

    def test_the_configured_peers_are_admitted_to_tensorboards_port_only(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(INGRESS_FROM_ENV, json.dumps([INGRESS_NGINX]))
        spec = self.policy(pytorch({ANNOTATION: "s3://exp"}))["spec"]
        assert spec["ingress"] == [{"from": [INGRESS_NGINX], "ports": [{"protocol": "TCP", "port": 6006}]}]

    def test_the_policy_leaves_tensorboards_egress_to_the_object_store_open(self) -> None:
        assert "Egress" not in self.policy(pytorch({ANNOTATION: "s3://exp"}))["spec"]["policyTypes"]

    def test_a_job_without_the_annotation_has_no_network_policy(self) -> None:
        assert names(Cluster(admitted(pytorch())).sync().children, "NetworkPolicy") == []


class TestIngressFromSetting:
    @pytest.mark.parametrize(
        "peers",
        [
            [],
            [INGRESS_NGINX],
            [{"namespaceSelector": {}}],
            [{"podSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}],
            [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}}],
        ],
    )
    def test_a_list_of_network_policy_peers_is_read(self, peers: list[dict[str, Any]]) -> None:
        assert INGRESS_FROM.read({INGRESS_FROM_ENV: json.dumps(peers)}) == tuple(peers)

    def test_unset_means_no_peer(self) -> None:
        assert INGRESS_FROM.read({}) == ()

    @pytest.mark.parametrize(
        ("raw", "problem"),
        [
            ("ingress-nginx", "a JSON list of NetworkPolicyPeers"),
            ('{"podSelector": {}}', "a JSON list of NetworkPolicyPeers"),
            ('[{"namespace": "x"}]', "[0]: unknown field 'namespace'"),
            ("[{}]", "[0]: must be an object with namespaceSelector, podSelector or ipBlock"),
            (
                '[{"podSelector": {"matchLabels": {"app": 1}}}]',
                "[0]: podSelector: matchLabels[app]: 1 is not",
            ),
            (
                '[{"podSelector": {"matchLabels": {"a b": "x"}}}]',
                "[0]: podSelector: matchLabels: 'a b' is not",
            ),
            (
                '[{"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]',
                "[0]: podSelector: matchExpressions[0].values: In needs at least one value",
            ),
            ('[{"ipBlock": {"cidr": "10.0.0.0/99"}}]', "[0]: ipBlock: '10.0.0.0/99' is not a CIDR"),
            ('[{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]', "[0]: ipBlock cannot be combined"),
        ],
    )
    def test_a_malformed_value_stops_the_servers_naming_the_variable_and_the_problem(
        self, raw: str, problem: str
    ) -> None:
        with pytest.raises(SettingError) as caught:
            TensorBoard().check_settings({INGRESS_FROM_ENV: raw})
        message = str(caught.value)
        assert message.startswith(f"{INGRESS_FROM_ENV}: expected ")
        assert problem in message
        assert message.endswith(f", got {raw!r}")


class TestLocalNotices:
    def test_a_local_run_says_the_cluster_objects_are_not_run_here(self) -> None:
        [notice] = TensorBoard().local_notices({ANNOTATION: "s3://exp"})
        assert "NetworkPolicy" in notice and "--tensorboard" in notice

    def test_a_local_run_without_the_annotation_says_nothing(self) -> None:
        assert TensorBoard().local_notices({}) == ()
