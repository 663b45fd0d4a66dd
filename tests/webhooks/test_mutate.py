"""POST /mutate: the defaulting webhook patches a job into what Kubeflow's defaulter produces.

The defaults: docs/design.md#defaulting.
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from tests.builders import admission_review, container, job, replica, with_run_policy, with_spec
from tests.webhooks.helpers import mutated, patch_of, review_response, validated
from trainop.jsontypes import Json
from webhooks import admission


def defaulted_replica(
    name: str, replicas: int, restart_policy: str, port: tuple[str, int] | None, image: str = "busybox:1.36"
) -> Json:
    """A replica spec as Kubeflow's defaulter leaves it, running one container called `name`."""
    ctr: Json = {"name": name, "image": image}
    if port:
        ctr["ports"] = [{"name": port[0], "containerPort": port[1]}]
    return {
        "replicas": replicas,
        "restartPolicy": restart_policy,
        "template": {"spec": {"containers": [ctr]}},
    }


def unset(kind: str) -> Json:
    """A replica spec with neither replicas nor restartPolicy."""
    return replica(kind, replicas=None)


RUN_POLICY = {"cleanPodPolicy": "None", "suspend": False}


def test_tfjob_gets_replicas_restart_policy_port_clean_pod_policy_and_success_policy(
    client: FlaskClient,
) -> None:
    out = mutated(client, job("TFJob", PS=unset("TFJob"), Worker=unset("TFJob"), Chief=unset("TFJob")))
    tf = defaulted_replica("tensorflow", 1, "Never", ("tfjob-port", 2222))
    assert out["spec"] == {
        "tfReplicaSpecs": {"PS": tf, "Worker": tf, "Chief": tf},
        "runPolicy": RUN_POLICY,
        "successPolicy": "",
    }


def test_tfjob_replica_keys_are_normalised_to_their_canonical_case(client: FlaskClient) -> None:
    out = mutated(client, job("TFJob", ps=1, worker=2, chief=1, evaluator=1))
    assert set(out["spec"]["tfReplicaSpecs"]) == {"PS", "Worker", "Chief", "Evaluator"}
    assert out["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2


def test_pytorchjob_gets_on_failure_port_23456_and_nproc_per_node_auto(client: FlaskClient) -> None:
    out = mutated(client, job("PyTorchJob", master=unset("PyTorchJob"), worker=unset("PyTorchJob")))
    pt = defaulted_replica("pytorch", 1, "OnFailure", ("pytorchjob-port", 23456))
    assert out["spec"] == {
        "pytorchReplicaSpecs": {"Master": pt, "Worker": pt},
        "runPolicy": RUN_POLICY,
        "nprocPerNode": "auto",
    }


@pytest.mark.parametrize(
    ("elastic", "expected_min", "expected_max"),
    [
        ({}, 3, 3),  # neither bound: both follow Worker replicas
        ({"maxReplicas": 5}, 5, 5),  # only max: min := max
        ({"minReplicas": 2}, 2, 2),  # only min: max := min
        ({"minReplicas": 1, "maxReplicas": 4}, 1, 4),  # both: unchanged
    ],
)
def test_pytorchjob_elastic_bounds_are_completed(
    client: FlaskClient, elastic: Json, expected_min: int, expected_max: int
) -> None:
    raw = with_spec(job("PyTorchJob", Worker=3), elasticPolicy={"rdzvBackend": "c10d", **elastic})
    policy = mutated(client, raw)["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (expected_min, expected_max)


def test_pytorchjob_keeps_the_deprecated_nproc_per_node_instead_of_adding_auto(client: FlaskClient) -> None:
    raw = with_spec(job("PyTorchJob", Worker=2), elasticPolicy={"nProcPerNode": 4})
    spec = mutated(client, raw)["spec"]
    assert "nprocPerNode" not in spec
    assert spec["elasticPolicy"]["nProcPerNode"] == 4


def test_pytorchjob_keeps_an_explicit_nproc_per_node(client: FlaskClient) -> None:
    raw = with_spec(job("PyTorchJob", Master=1), nprocPerNode="gpu")
    assert mutated(client, raw)["spec"]["nprocPerNode"] == "gpu"


def test_xgboostjob_gets_never_and_port_9999(client: FlaskClient) -> None:
    out = mutated(client, job("XGBoostJob", Master=unset("XGBoostJob"), Worker=unset("XGBoostJob")))
    xgb = defaulted_replica("xgboost", 1, "Never", ("xgboostjob-port", 9999))
    assert out["spec"] == {"xgbReplicaSpecs": {"Master": xgb, "Worker": xgb}, "runPolicy": RUN_POLICY}


def test_mpijob_gets_one_launcher_zero_workers_never_and_no_port(client: FlaskClient) -> None:
    out = mutated(client, job("MPIJob", Launcher=unset("MPIJob"), Worker=unset("MPIJob")))
    assert out["spec"] == {
        "mpiReplicaSpecs": {
            "Launcher": defaulted_replica("mpi", 1, "Never", None),
            "Worker": defaulted_replica("mpi", 0, "Never", None),
        },
        "runPolicy": RUN_POLICY,
        "cleanPodPolicy": "None",
    }


@pytest.mark.parametrize(
    ("top_level", "run_policy", "expected"),
    [
        (None, None, "None"),
        ("All", None, "All"),  # the legacy top-level field is copied into runPolicy
        (None, "Running", "Running"),  # and runPolicy's value into the legacy field
        ("All", "Running", "Running"),  # runPolicy wins when both are set
    ],
)
def test_mpijob_clean_pod_policy_is_mirrored_between_spec_and_run_policy(
    client: FlaskClient, top_level: str | None, run_policy: str | None, expected: str
) -> None:
    raw = job("MPIJob", Launcher=1, Worker=2)
    if top_level:
        raw = with_spec(raw, cleanPodPolicy=top_level)
    if run_policy:
        raw = with_run_policy(raw, cleanPodPolicy=run_policy)
    spec = mutated(client, raw)["spec"]
    assert (spec["cleanPodPolicy"], spec["runPolicy"]["cleanPodPolicy"]) == (expected, expected)


def test_mpijob_replica_keys_are_normalised_like_every_other_kind(client: FlaskClient) -> None:
    out = mutated(client, job("MPIJob", launcher=1, Worker=1))
    assert set(out["spec"]["mpiReplicaSpecs"]) == {"Launcher", "Worker"}


def test_paddlejob_gets_on_failure_and_port_master_36543(client: FlaskClient) -> None:
    out = mutated(client, job("PaddleJob", Master=unset("PaddleJob"), worker=unset("PaddleJob")))
    pd = defaulted_replica("paddle", 1, "OnFailure", ("master", 36543))
    assert out["spec"] == {"paddleReplicaSpecs": {"Master": pd, "Worker": pd}, "runPolicy": RUN_POLICY}


def test_paddlejob_elastic_bounds_follow_worker_replicas(client: FlaskClient) -> None:
    raw = with_spec(job("PaddleJob", Worker=4), elasticPolicy={"maxRestarts": 3})
    policy = mutated(client, raw)["spec"]["elasticPolicy"]
    assert policy == {"maxRestarts": 3, "minReplicas": 4, "maxReplicas": 4}


def test_jaxjob_gets_never_and_port_6666(client: FlaskClient) -> None:
    out = mutated(client, job("JAXJob", worker=unset("JAXJob")))
    jax = defaulted_replica("jax", 1, "Never", ("jaxjob-port", 6666))
    assert out["spec"] == {"jaxReplicaSpecs": {"Worker": jax}, "runPolicy": RUN_POLICY}


def test_mxjob_gets_never_and_port_9091(client: FlaskClient) -> None:
    out = mutated(
        client,
        job("MXJob", scheduler=unset("MXJob"), server=unset("MXJob"), Worker=unset("MXJob")),
    )
    mx = defaulted_replica("mxnet", 1, "Never", ("mxjob-port", 9091))
    assert out["spec"] == {
        "mxReplicaSpecs": {"Scheduler": mx, "Server": mx, "Worker": mx},
        "runPolicy": RUN_POLICY,
    }


def test_port_goes_on_the_default_container_even_when_it_is_not_first(client: FlaskClient) -> None:
    raw = job("PyTorchJob", Master=replica("PyTorchJob", 1, [container("sidecar"), container("pytorch")]))
    containers = mutated(client, raw)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"
    ]
    assert "ports" not in containers[0]
    assert containers[1]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_a_port_with_the_default_name_is_kept_as_the_user_wrote_it(client: FlaskClient) -> None:
    own = container("tensorflow", ports=[{"name": "tfjob-port", "containerPort": 3333}])
    out = mutated(client, job("TFJob", Worker=replica("TFJob", 1, [own])))
    ports = out["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "tfjob-port", "containerPort": 3333}]


def test_the_default_port_is_appended_after_other_ports(client: FlaskClient) -> None:
    own = container("jax", ports=[{"name": "metrics", "containerPort": 8080}])
    out = mutated(client, job("JAXJob", Worker=replica("JAXJob", 1, [own])))
    ports = out["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [
        {"name": "metrics", "containerPort": 8080},
        {"name": "jaxjob-port", "containerPort": 6666},
    ]


def test_explicit_values_are_never_overwritten(client: FlaskClient) -> None:
    raw = with_run_policy(
        job("TFJob", Worker=replica("TFJob", 3, restartPolicy="ExitCode")), cleanPodPolicy="All", suspend=True
    )
    spec = mutated(client, raw)["spec"]
    assert spec["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    assert spec["tfReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    assert spec["runPolicy"] == {"cleanPodPolicy": "All", "suspend": True}


def test_the_patch_never_touches_metadata(client: FlaskClient) -> None:
    review = admission_review(job("PyTorchJob", Master=1, Worker=1))
    ops = patch_of(review_response(client, "/mutate", review))
    assert ops
    assert all(op["path"].startswith("/spec/") or op["path"] == "/spec" for op in ops)


EXAMPLES = {
    "TFJob": job("TFJob", PS=1, Worker=2),
    "PyTorchJob": with_spec(job("PyTorchJob", Worker=2), elasticPolicy={"maxReplicas": 4}),
    "XGBoostJob": job("XGBoostJob", Master=1, Worker=2),
    "MPIJob": job("MPIJob", Launcher=1, Worker=2),
    "PaddleJob": job("PaddleJob", Master=1, Worker=2),
    "JAXJob": job("JAXJob", Worker=2),
    "MXJob": job("MXJob", Scheduler=1, Server=1, Worker=2),
}


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_mutating_a_defaulted_job_yields_no_patch(client: FlaskClient, kind: str) -> None:
    once = mutated(client, EXAMPLES[kind])
    response = review_response(client, "/mutate", admission_review(once))
    assert response["allowed"] is True
    assert "patch" not in response
    assert "patchType" not in response


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_the_defaulted_job_passes_validation(client: FlaskClient, kind: str) -> None:
    response = validated(client, mutated(client, EXAMPLES[kind]))
    assert response["allowed"] is True, response.get("status")


def test_update_is_defaulted_too(client: FlaskClient) -> None:
    old = mutated(client, job("JAXJob", Worker=2))
    new = job("JAXJob", Worker=3)
    assert (
        mutated(client, new, "UPDATE", old)["spec"]["jaxReplicaSpecs"]["Worker"]["restartPolicy"] == "Never"
    )


def test_a_diff_that_does_not_reproduce_the_defaults_is_replaced_by_whole_field_replacement(
    monkeypatch: pytest.MonkeyPatch, client: FlaskClient
) -> None:
    class WrongPatch:
        patch = [{"op": "add", "path": "/spec/nprocPerNode", "value": "gpu"}]

    monkeypatch.setattr(admission.jsonpatch, "make_patch", lambda before, after: WrongPatch())
    raw = job("PyTorchJob", Master=1)
    ops = patch_of(review_response(client, "/mutate", admission_review(raw)))
    assert [op["path"] for op in ops] == ["/spec"]
    monkeypatch.undo()
    assert mutated(client, raw) == admission.jsonpatch.apply_patch(raw, ops)


def test_explicit_null_replicas_get_the_kinds_default(client: FlaskClient) -> None:
    raw = job("JAXJob", Worker=replica("JAXJob", None))
    raw["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = None
    assert mutated(client, raw)["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] == 1
