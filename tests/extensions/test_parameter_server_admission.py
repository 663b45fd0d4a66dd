"""The default-server annotation through the webhooks, as the apiserver calls them: the defaulting
webhook's patch stores the command, volume and mount the PS will run, the validating webhook denies a
misuse with the field named, and a job without our annotations is not patched at all."""

from __future__ import annotations

import copy

import pytest
from flask.testing import FlaskClient

from tests.builders import admission_review, container, job, replica, with_run_policy
from tests.webhooks.helpers import denial, mutated, patch_of, review_response, validated
from trainop.extensions.parameterserver import DEFAULT_ENV, MOUNT_PATH, PROGRAM, VOLUME, key_for
from trainop.jsontypes import Json

PS = key_for("PS")
IMAGE = "example.com/team/tf:2.21"


def tfjob(annotations: dict[str, str] | None = None, ps: Json | None = None) -> Json:
    out = job(
        "TFJob",
        name="mnist",
        Chief=replica("TFJob", 1, [container("tensorflow", IMAGE, command=["python3", "train.py"])]),
        Worker=replica("TFJob", 1, [container("tensorflow", IMAGE)]),
        PS=ps or replica("TFJob", 1, [container("tensorflow", IMAGE)]),
    )
    if annotations is not None:
        out["metadata"]["annotations"] = dict(annotations)
    return with_run_policy(out, cleanPodPolicy="Running")


def ps_template(obj: Json) -> Json:
    spec: Json = obj["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]
    return spec


def test_the_stored_ps_template_shows_the_program_it_runs(client: FlaskClient) -> None:
    stored = ps_template(mutated(client, tfjob({PS: "tensorflow"})))
    [ctr] = stored["containers"]
    assert ctr["command"] == [
        "python3",
        f"{MOUNT_PATH}/{PROGRAM}",
        "--termination-log",
        "/dev/termination-log",
    ]
    assert ctr["volumeMounts"] == [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}]
    assert stored["volumes"] == [{"name": VOLUME, "configMap": {"name": "mnist-tf-server"}}]


def test_the_stored_job_is_admitted_again_unchanged(client: FlaskClient) -> None:
    stored = mutated(client, tfjob({PS: "tensorflow"}))
    assert validated(client, stored)["allowed"] is True
    assert patch_of(review_response(client, "/mutate", admission_review(copy.deepcopy(stored)))) == []


def test_a_ps_with_its_own_command_is_denied_naming_the_command(client: FlaskClient) -> None:
    own = replica("TFJob", 1, [container("tensorflow", IMAGE, command=["python3", "ps.py"])])
    message = denial(client, tfjob({PS: "tensorflow"}, ps=own))
    assert message.startswith("spec.tfReplicaSpecs[PS].template.spec.containers[0].command: Forbidden: ")


def test_the_annotation_on_another_kind_is_denied(client: FlaskClient) -> None:
    obj = job("PyTorchJob", Master=1, Worker=1)
    obj["metadata"]["annotations"] = {PS: "tensorflow"}
    assert denial(client, obj).startswith(f"metadata.annotations[{PS}]: Invalid value: ")


def test_the_cluster_default_is_written_onto_a_ps_without_a_command(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEFAULT_ENV, "true")
    stored = mutated(client, tfjob())
    assert stored["metadata"]["annotations"] == {PS: "tensorflow"}
    assert ps_template(stored)["containers"][0]["command"][1] == f"{MOUNT_PATH}/{PROGRAM}"


def test_without_the_annotation_or_the_default_the_ps_is_as_kubeflow_runs_it(client: FlaskClient) -> None:
    stored = mutated(client, tfjob())
    assert "command" not in ps_template(stored)["containers"][0]
    assert "annotations" not in stored["metadata"]


def test_servers_outliving_the_job_are_a_warning_not_a_denial(client: FlaskClient) -> None:
    obj = with_run_policy(tfjob({PS: "tensorflow"}), cleanPodPolicy="None")
    response = validated(client, obj)
    assert response["allowed"] is True
    assert any("cleanPodPolicy: Running" in w for w in response["warnings"])
