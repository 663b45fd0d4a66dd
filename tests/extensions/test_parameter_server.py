"""The default TensorFlow server (`trainop.dev/default-server.<ReplicaType>: tensorflow`): what defaulting
writes into the template, what validation refuses, the ConfigMap child, and the cause the Failed
condition names when the image has no TensorFlow (docs/parameter-server.md)."""

from __future__ import annotations

import copy

import pytest

from tests.builders import container, job, replica, with_run_policy
from tests.controller.fakes import Cluster
from trainop.admission.admit import admit
from trainop.admission.defaults import apply_defaults as kubeflow_defaults
from trainop.api import constants as c
from trainop.extensions.parameterserver import (
    DEFAULT_ENV,
    MOUNT_PATH,
    PROGRAM,
    VOLUME,
    key_for,
    program_source,
)
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.jsontypes import Json

PS = key_for("PS")
WORKER = key_for("Worker")
COMMAND = ["python3", f"{MOUNT_PATH}/{PROGRAM}", "--termination-log", "/dev/termination-log"]
IMAGE = "example.com/team/tf:2.21"


def tfjob(annotations: dict[str, str] | None = None, **types: Json | int) -> Json:
    """A TFJob `j` (Chief, Worker and PS by default) whose containers run IMAGE."""
    counts = types or {"Chief": 1, "Worker": 1, "PS": 1}
    out = job("TFJob", name="j")
    out["spec"]["tfReplicaSpecs"] = {
        t: v if isinstance(v, dict) else replica("TFJob", v, [container("tensorflow", IMAGE)])
        for t, v in counts.items()
    }
    if annotations is not None:
        out["metadata"]["annotations"] = dict(annotations)
    return out


def admitted(obj: Json) -> Json:
    result = admit(obj)
    assert result.checks.ok, result.checks.message
    return result.job


def errors(obj: Json) -> list[str]:
    return [str(e) for e in admit(obj).checks.errors]


def template(obj: Json, rtype: str) -> Json:
    spec: Json = obj["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
    return spec


def tensorflow_container(obj: Json, rtype: str) -> Json:
    [ctr] = template(obj, rtype)["containers"]
    return ctr


class TestDefaulting:
    def test_the_template_shows_the_command_volume_and_mount_it_will_run(self) -> None:
        spec = template(admitted(tfjob({PS: "tensorflow"})), "PS")
        [ctr] = spec["containers"]
        assert ctr["command"] == COMMAND
        assert ctr["image"] == IMAGE
        assert ctr["volumeMounts"] == [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}]
        assert spec["volumes"] == [{"name": VOLUME, "configMap": {"name": "j-tf-server"}}]

    def test_only_the_annotated_replica_type_changes(self) -> None:
        out = admitted(tfjob({PS: "tensorflow"}))
        assert "command" not in tensorflow_container(out, "Worker")
        assert "volumes" not in template(out, "Chief")

    def test_a_worker_of_parameter_server_training_can_run_it_too(self) -> None:
        out = admitted(tfjob({PS: "tensorflow", WORKER: "tensorflow"}))
        assert tensorflow_container(out, "Worker")["command"] == COMMAND

    def test_the_replicas_own_volumes_and_mounts_are_kept(self) -> None:
        own = container("tensorflow", IMAGE, volumeMounts=[{"name": "data", "mountPath": "/data"}])
        ps = replica("TFJob", 1, [own], template={})
        ps["template"] = {"spec": {"containers": [own], "volumes": [{"name": "data", "emptyDir": {}}]}}
        spec = template(admitted(tfjob({PS: "tensorflow"}, Chief=1, PS=ps)), "PS")
        assert [v["name"] for v in spec["volumes"]] == ["data", VOLUME]
        assert [m["name"] for m in spec["containers"][0]["volumeMounts"]] == ["data", VOLUME]

    def test_a_custom_termination_message_path_is_where_the_server_reports(self) -> None:
        own = container("tensorflow", IMAGE, terminationMessagePath="/tmp/why")
        out = admitted(tfjob({PS: "tensorflow"}, Chief=1, PS=replica("TFJob", 1, [own])))
        assert tensorflow_container(out, "PS")["command"][-2:] == ["--termination-log", "/tmp/why"]

    def test_admitting_twice_is_admitting_once(self) -> None:
        once = admitted(tfjob({PS: "tensorflow"}))
        assert admitted(copy.deepcopy(once)) == once

    def test_a_job_without_the_annotation_is_left_as_kubeflow_has_it(self) -> None:
        plain = tfjob()
        assert admitted(plain) == kubeflow_defaults(plain)

    def test_the_cluster_default_annotates_a_ps_without_command_or_args(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(DEFAULT_ENV, "true")
        out = admitted(tfjob())
        assert out["metadata"]["annotations"] == {PS: "tensorflow"}
        assert tensorflow_container(out, "PS")["command"] == COMMAND
        assert "command" not in tensorflow_container(out, "Worker")

    @pytest.mark.parametrize("field", ["command", "args"])
    def test_the_cluster_default_leaves_a_ps_that_runs_its_own_program(
        self, monkeypatch: pytest.MonkeyPatch, field: str
    ) -> None:
        monkeypatch.setenv(DEFAULT_ENV, "true")
        own = container("tensorflow", IMAGE, **{field: ["ps.py"]})
        out = admitted(tfjob(Chief=1, PS=replica("TFJob", 1, [own])))
        assert "annotations" not in out["metadata"]
        assert tensorflow_container(out, "PS")[field] == ["ps.py"]

    def test_the_cluster_default_leaves_other_kinds_alone(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(DEFAULT_ENV, "true")
        assert "annotations" not in admitted(job("PyTorchJob", Master=1, Worker=1))["metadata"]

    def test_the_cluster_default_is_off_unless_set(self) -> None:
        assert "annotations" not in admitted(tfjob())["metadata"]

    def test_a_broken_cluster_default_is_an_error_naming_the_setting(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(DEFAULT_ENV, "yes")
        assert errors(tfjob()) == [
            f"{DEFAULT_ENV}: {DEFAULT_ENV}='yes': must be true or false "
            "(the cluster's default parameter server: ask its administrator)"
        ]


class TestValidation:
    @pytest.mark.parametrize("field", ["command", "args"])
    def test_a_container_that_sets_a_command_or_args_is_refused_naming_the_field(self, field: str) -> None:
        own = container("tensorflow", IMAGE, **{field: ["python3", "ps.py"]})
        [error] = errors(tfjob({PS: "tensorflow"}, Chief=1, PS=replica("TFJob", 1, [own])))
        assert error.startswith(f"spec.tfReplicaSpecs[PS].template.spec.containers[0].{field}: Forbidden: ")
        assert f"remove the {field} to run the default server, or remove the annotation" in error

    def test_another_kind_is_refused(self) -> None:
        obj = job("PyTorchJob", Master=1, Worker=1)
        obj["metadata"]["annotations"] = {PS: "tensorflow"}
        [error] = errors(obj)
        assert error.startswith(f"metadata.annotations[{PS}]: Invalid value: the default server is for TFJob")

    def test_a_replica_type_the_job_lacks_is_refused_listing_those_it_has(self) -> None:
        [error] = errors(tfjob({PS: "tensorflow"}, Chief=1, Worker=2))
        assert error == (
            f'metadata.annotations[{PS}]: Invalid value: this TFJob has no "PS" replicas (it has Chief, '
            "Worker); add them or remove the annotation"
        )

    @pytest.mark.parametrize("rtype", ["Chief", "Master", "Evaluator"])
    def test_a_replica_type_that_runs_the_users_program_is_refused(self, rtype: str) -> None:
        [error] = errors(tfjob({key_for(rtype): "tensorflow"}, PS=1, Worker=1, **{rtype: 1}))
        assert error.startswith(f'metadata.annotations[{key_for(rtype)}]: Invalid value: "{rtype}" runs')

    def test_a_value_other_than_tensorflow_is_refused_with_the_supported_one(self) -> None:
        [error] = errors(tfjob({PS: "default"}))
        assert error.startswith(
            f'metadata.annotations[{PS}]: Unsupported value: "default": supported values: "tensorflow"'
        )

    def test_the_key_without_a_replica_type_is_refused_with_an_example(self) -> None:
        [error] = errors(tfjob({"trainop.dev/default-server": "tensorflow"}))
        assert "name the replica type in the key, e.g. trainop.dev/default-server.PS: tensorflow" in error

    def test_servers_only_workers_without_a_chief_are_refused(self) -> None:
        [error] = errors(tfjob({WORKER: "tensorflow"}, PS=1, Worker=2))
        assert error.startswith(f"metadata.annotations[{WORKER}]: Invalid value: without a Chief")

    def test_a_job_of_one_replica_gets_no_tf_config_and_is_refused(self) -> None:
        [error] = errors(tfjob({PS: "tensorflow"}, PS=1))
        assert "gets no TF_CONFIG" in error

    def test_the_replica_type_is_matched_in_any_case_as_tfjob_does(self) -> None:
        out = admitted(tfjob({key_for("ps"): "tensorflow"}, Chief=1, ps=1))
        assert tensorflow_container(out, "PS")["command"] == COMMAND

    def test_servers_that_outlive_the_job_are_warned_of_with_the_fix(self) -> None:
        [warning] = admit(tfjob({PS: "tensorflow"})).checks.warnings
        assert warning == (
            f"metadata.annotations[{PS}]: a default server never exits by itself, and with "
            "spec.runPolicy.cleanPodPolicy None its pods keep running after the job finishes; set "
            "cleanPodPolicy: Running to delete them then"
        )

    def test_clean_pod_policy_running_needs_no_warning(self) -> None:
        obj = with_run_policy(tfjob({PS: "tensorflow"}), cleanPodPolicy="Running")
        assert admit(obj).checks.warnings == []


class TestSync:
    def test_the_job_gets_one_configmap_child_holding_the_program(self) -> None:
        children = Cluster(tfjob({PS: "tensorflow"})).sync().response()["children"]
        assert [o for o in children if o["kind"] == "ConfigMap"] == [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "j-tf-server",
                    "namespace": "default",
                    "labels": {c.LABEL_JOB_NAME: "j", "trainop.dev/component": "default-server"},
                },
                "data": {PROGRAM: program_source()},
            }
        ]

    def test_the_ps_pod_runs_the_program_from_the_configmap_with_tf_config(self) -> None:
        cluster = Cluster(tfjob({PS: "tensorflow"}))
        cluster.sync()
        cluster.sync()  # the PS pod, once j-tf-server is the job's
        pod = cluster.pod("j-ps-0")
        [ctr] = pod["spec"]["containers"]
        assert ctr["command"] == COMMAND
        assert {"name": VOLUME, "configMap": {"name": "j-tf-server"}} in pod["spec"]["volumes"]
        assert "TF_CONFIG" in {v["name"] for v in ctr["env"]}

    def test_a_job_without_the_annotation_has_no_configmap(self) -> None:
        cluster = Cluster(tfjob())
        cluster.sync()
        assert cluster.objects["ConfigMap.v1"] == {}

    def test_no_tensorflow_fails_the_job_naming_the_cause_and_the_image(self) -> None:
        cluster = Cluster(tfjob({PS: "tensorflow"}))
        cluster.sync()
        cluster.sync()  # the PS pod, once j-tf-server is the job's
        cluster.fail("j-ps-0", exit_code=NO_TENSORFLOW)
        cluster.converge()
        failed = cluster.condition("Failed")
        assert failed is not None and failed["status"] == "True"
        assert failed["message"] == (
            "TFJob default/j has failed because 1 PS replica(s) failed. j-ps-0 ran the default TensorFlow "
            f'server ({PS}) in image "{IMAGE}", which has no TensorFlow (exit code {NO_TENSORFLOW}): use an '
            "image with TensorFlow, or give the PS container a command of its own."
        )

    def test_with_restart_policy_exit_code_no_tensorflow_is_permanent_and_named(self) -> None:
        ps = replica("TFJob", 1, [container("tensorflow", IMAGE)], restartPolicy="ExitCode")
        cluster = Cluster(tfjob({PS: "tensorflow"}, Chief=1, PS=ps))
        cluster.sync()
        cluster.sync()  # the PS pod, once j-tf-server is the job's
        cluster.fail("j-ps-0", exit_code=NO_TENSORFLOW)
        cluster.converge()
        failed = cluster.condition("Failed")
        assert failed is not None
        assert failed["message"].startswith('job "j" is failing because "PS" replica(s) failed. j-ps-0 ran ')
        assert "j-ps-0" in cluster.pod_names()  # not recreated: 78 is below the retryable 128

    def test_another_exit_code_keeps_kubeflows_message_alone(self) -> None:
        cluster = Cluster(tfjob({PS: "tensorflow"}))
        cluster.sync()
        cluster.sync()  # the PS pod, once j-tf-server is the job's
        cluster.fail("j-ps-0", exit_code=1)
        cluster.converge()
        failed = cluster.condition("Failed")
        assert failed is not None
        assert failed["message"] == "TFJob default/j has failed because 1 PS replica(s) failed."

    def test_the_exit_code_of_a_users_own_ps_program_is_not_explained(self) -> None:
        own = container("tensorflow", IMAGE, command=["python3", "ps.py"])
        cluster = Cluster(tfjob(Chief=1, PS=replica("TFJob", 1, [own])))
        cluster.sync()
        cluster.sync()  # the PS pod, once j-tf-server is the job's
        cluster.fail("j-ps-0", exit_code=NO_TENSORFLOW)
        cluster.converge()
        failed = cluster.condition("Failed")
        assert failed is not None
        assert failed["message"] == "TFJob default/j has failed because 1 PS replica(s) failed."
