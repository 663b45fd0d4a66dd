"""POST /validate: every rule denies with a message naming the field path (docs/design.md#validation)."""

from __future__ import annotations

import copy

import pytest
from flask.testing import FlaskClient

from tests.builders import admission_review, container, job, replica, with_run_policy, with_spec
from tests.webhooks.helpers import denial, review_response, validated
from trainop.jsontypes import Json

VALID = {
    "TFJob": job("TFJob", Chief=1, PS=1, Worker=2),
    "PyTorchJob": job("PyTorchJob", Master=1, Worker=2),
    "XGBoostJob": job("XGBoostJob", Master=1, Worker=2),
    "MPIJob": job("MPIJob", Launcher=1, Worker=2),
    "PaddleJob": job("PaddleJob", Master=1, Worker=2),
    "JAXJob": job("JAXJob", Worker=2),
    "MXJob": job("MXJob", Scheduler=1, Server=1, Worker=2),
}


def with_template(kind: str, pod_spec: Json) -> Json:
    return {"replicas": 1, "template": {"spec": pod_spec}}


@pytest.mark.parametrize("kind", list(VALID))
def test_a_valid_job_is_allowed(client: FlaskClient, kind: str) -> None:
    response = validated(client, VALID[kind])
    assert response["allowed"] is True
    assert "status" not in response


def test_xgboostjob_without_master_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("XGBoostJob", Worker=2))
    assert message.startswith("spec.xgbReplicaSpecs: Required value: must contain exactly one Master")


def test_mpijob_without_launcher_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("MPIJob", Worker=2))
    assert message.startswith("spec.mpiReplicaSpecs: Required value: must contain exactly one Launcher")


def test_a_job_without_replica_specs_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("PaddleJob"))
    assert message.startswith("spec.paddleReplicaSpecs: Required value")


def test_replica_keys_differing_only_in_case_are_denied_as_duplicates(client: FlaskClient) -> None:
    message = denial(client, job("PyTorchJob", Master=1, Worker=1, worker=1))
    assert 'spec.pytorchReplicaSpecs[worker]: Duplicate value: "worker" and "Worker"' in message


def test_a_replica_type_the_kind_does_not_have_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("PyTorchJob", Master=1, Chief=1))
    assert 'spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief"' in message
    assert '"Master", "Worker"' in message


def test_a_misspelt_replica_type_is_denied_with_the_type_it_likely_means(client: FlaskClient) -> None:
    message = denial(client, job("PyTorchJob", Master=1, Workers=1))
    assert 'spec.pytorchReplicaSpecs[Workers]: Unsupported value: "Workers"' in message
    assert message.endswith('did you mean "Worker"?')


@pytest.mark.parametrize(
    ("kind", "field"), [("PyTorchJob", "pytorchReplicaSpecs"), ("XGBoostJob", "xgbReplicaSpecs")]
)
def test_master_with_two_replicas_is_denied(client: FlaskClient, kind: str, field: str) -> None:
    message = denial(client, job(kind, Master=2))
    assert f"spec.{field}[Master].replicas: Forbidden: Master must have exactly 1 replica, got 2" in message


def test_launcher_with_two_replicas_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("MPIJob", Launcher=2, Worker=1))
    assert "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden" in message


def test_negative_replicas_are_denied(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", Worker=-1))
    assert (
        message
        == "spec.tfReplicaSpecs[Worker].replicas: Invalid value: -1: must be greater than or equal to 0"
    )


def test_replicas_beyond_what_one_sync_can_manage_are_denied(client: FlaskClient) -> None:
    message = denial(client, job("JAXJob", Worker=10_001))
    assert message.startswith(
        "spec.jaxReplicaSpecs[Worker].replicas: Invalid value: 10001: must be at most 10000"
    )


def test_pytorch_worker_with_zero_replicas_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("PyTorchJob", Master=1, Worker=0))
    assert message == "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1, got 0"


def test_tf_worker_with_zero_replicas_is_allowed(client: FlaskClient) -> None:
    assert validated(client, job("TFJob", Chief=1, Worker=0))["allowed"] is True


def test_a_replica_without_the_default_container_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("PyTorchJob", Master=replica("PyTorchJob", 1, [container("main")])))
    assert message.startswith(
        "spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must have at least one "
        'container named "pytorch" (found "main")'
    )


def test_an_mpijob_whose_containers_have_other_names_is_allowed(client: FlaskClient) -> None:
    # Kubeflow's examples/mpi/tensorflow-mnist-elastic.yaml: its controller uses the first container.
    raw = job(
        "MPIJob",
        Launcher=replica("MPIJob", 1, [container("mpi-launcher")]),
        Worker=replica("MPIJob", 2, [container("mpi-worker")]),
    )
    assert validated(client, raw)["allowed"] is True


def test_a_replica_without_containers_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("JAXJob", Worker=with_template("JAXJob", {"containers": []})))
    assert message.startswith("spec.jaxReplicaSpecs[Worker].template.spec.containers: Required value")


def test_a_container_without_image_is_denied(client: FlaskClient) -> None:
    message = denial(
        client, job("XGBoostJob", Master=replica("XGBoostJob", 1, [container("xgboost", image="")]))
    )
    assert message == (
        "spec.xgbReplicaSpecs[Master].template.spec.containers[0].image: "
        "Required value: every container needs an image"
    )


def test_an_unknown_restart_policy_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", Worker=replica("TFJob", 1, restartPolicy="Sometimes")))
    assert message.startswith('spec.tfReplicaSpecs[Worker].restartPolicy: Unsupported value: "Sometimes"')
    assert '"Always", "OnFailure", "Never", "ExitCode"' in message


def test_an_unknown_clean_pod_policy_is_denied(client: FlaskClient) -> None:
    message = denial(client, with_run_policy(VALID["JAXJob"], cleanPodPolicy="Some"))
    assert message == (
        'spec.runPolicy.cleanPodPolicy: Unsupported value: "Some": supported values: "All", "Running", "None"'
    )


def test_an_unknown_mpi_top_level_clean_pod_policy_is_denied(client: FlaskClient) -> None:
    # Validation sees the defaulted job, as behind the defaulting webhook on a cluster, where the legacy
    # field has been copied into spec.runPolicy: both name the value.
    message = denial(client, with_spec(VALID["MPIJob"], cleanPodPolicy="Everything"))
    unsupported = 'Unsupported value: "Everything": supported values: "All", "Running", "None"'
    assert message == f"spec.runPolicy.cleanPodPolicy: {unsupported}; spec.cleanPodPolicy: {unsupported}"


@pytest.mark.parametrize("main", ["trainer\nrm -rf /", "a;b", "Trainer", "-mpi", "x" * 64])
def test_an_mpi_main_container_that_is_not_a_container_name_is_denied(client: FlaskClient, main: str) -> None:
    message = denial(client, with_spec(VALID["MPIJob"], mainContainer=main))
    assert message.startswith(f"spec.mainContainer: Invalid value: {main!r}: must be a container name")
    assert "DNS-1123 label of at most 63 characters" in message


@pytest.mark.parametrize("main", ["mpi", "trainer-2", "0", "x" * 63])
def test_an_mpi_main_container_that_is_a_container_name_is_allowed(client: FlaskClient, main: str) -> None:
    assert validated(client, with_spec(VALID["MPIJob"], mainContainer=main))["allowed"] is True


def test_an_unknown_success_policy_is_denied(client: FlaskClient) -> None:
    message = denial(client, with_spec(VALID["TFJob"], successPolicy="ChiefOnly"))
    assert message == 'spec.successPolicy: Unsupported value: "ChiefOnly": supported values: "", "AllWorkers"'


def test_an_unknown_rendezvous_backend_is_denied(client: FlaskClient) -> None:
    message = denial(client, with_spec(VALID["PyTorchJob"], elasticPolicy={"rdzvBackend": "zookeeper"}))
    assert message.startswith('spec.elasticPolicy.rdzvBackend: Unsupported value: "zookeeper"')
    assert '"c10d", "etcd", "etcd-v2"' in message


@pytest.mark.parametrize("kind", ["TFJob", "PyTorchJob", "JAXJob", "MPIJob"])
def test_an_unknown_managed_by_is_denied(client: FlaskClient, kind: str) -> None:
    message = denial(client, with_run_policy(VALID[kind], managedBy="example.com/other"))
    assert message == (
        'spec.runPolicy.managedBy: Unsupported value: "example.com/other": supported values: '
        '"kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"'
    )


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob"])
def test_elastic_min_above_max_is_denied(client: FlaskClient, kind: str) -> None:
    raw = with_spec(VALID[kind], elasticPolicy={"minReplicas": 3, "maxReplicas": 2})
    message = denial(client, raw)
    assert message == (
        "spec.elasticPolicy.minReplicas: Invalid value: 3: must be less than or equal to "
        "spec.elasticPolicy.maxReplicas (2)"
    )


def test_elastic_policy_without_worker_is_denied(client: FlaskClient) -> None:
    message = denial(client, with_spec(job("PyTorchJob", Master=1), elasticPolicy={"maxReplicas": 3}))
    assert message == (
        "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"
    )


def test_deprecated_nproc_per_node_is_allowed_with_a_warning(client: FlaskClient) -> None:
    response = validated(client, with_spec(VALID["PyTorchJob"], elasticPolicy={"nProcPerNode": 2}))
    assert response["allowed"] is True
    assert response["warnings"] == ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode"]


def test_deprecated_nproc_per_node_together_with_nproc_per_node_is_denied_and_warned(
    client: FlaskClient,
) -> None:
    raw = with_spec(VALID["PyTorchJob"], nprocPerNode="4", elasticPolicy={"nProcPerNode": 2})
    response = validated(client, raw)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode; "
        "remove one of them"
    )
    assert "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode" in response["warnings"]


@pytest.mark.parametrize("value", ["many", "0", "-1", "4.5", "²"])
def test_a_malformed_nproc_per_node_is_denied(client: FlaskClient, value: str) -> None:
    message = denial(client, with_spec(VALID["PyTorchJob"], nprocPerNode=value))
    assert message.startswith(f'spec.nprocPerNode: Invalid value: "{value}"')


@pytest.mark.parametrize("name", ["My-Job", "1job", "job_1", "job-", "a.b"])
def test_a_name_that_is_not_a_dns_1035_label_is_denied(client: FlaskClient, name: str) -> None:
    message = denial(client, job("JAXJob", name=name, Worker=1))
    assert message.startswith(f'metadata.name: Invalid value: "{name}": must be a DNS-1035 label')


def test_a_name_whose_largest_pod_name_exceeds_63_characters_is_denied(client: FlaskClient) -> None:
    name = "n" * 53  # "<name>-worker-0" is 62 characters, "<name>-worker-999" is 64
    assert validated(client, job("TFJob", name=name, Worker=1))["allowed"] is True
    message = denial(client, job("TFJob", name=name, Worker=1000))
    assert message.startswith(
        f'metadata.name: Invalid value: "{name}": the child name "{name}-worker-999" would be 64'
    )
    assert "use a name of at most 52 characters" in message


def with_metadata(obj: Json, **fields: Json) -> Json:
    out = copy.deepcopy(obj)
    out["metadata"].update(fields)
    return out


def test_a_label_that_is_not_a_string_is_denied_naming_it(client: FlaskClient) -> None:
    """The sync hook answers such a job with a 400 (tests/hooks/test_http.py), so it is never admitted."""
    raw = with_metadata(VALID["JAXJob"], labels={"training.kubeflow.org/replica-type": ["Worker"]})
    field = "metadata.labels[training.kubeflow.org/replica-type]"
    assert denial(client, raw) == f"{field}: Invalid value: ['Worker']: label values are strings"


def test_an_annotation_that_is_not_a_string_is_denied_naming_it(client: FlaskClient) -> None:
    raw = with_metadata(VALID["JAXJob"], annotations={"note": None})
    assert (
        denial(client, raw)
        == "metadata.annotations[note]: Invalid value: None: annotation values are strings"
    )


def test_labels_that_are_not_an_object_are_denied(client: FlaskClient) -> None:
    raw = with_metadata(VALID["JAXJob"], labels=["team"])
    assert denial(client, raw) == "metadata.labels: Invalid value: ['team']: must map strings to strings"


def test_a_metadata_only_update_to_a_list_valued_label_is_denied(client: FlaskClient) -> None:
    old = VALID["JAXJob"]
    message = denial(client, with_metadata(old, labels={"team": ["a"]}), "UPDATE", old)
    assert message == "metadata.labels[team]: Invalid value: ['a']: label values are strings"


def test_mpijob_name_leaves_room_for_the_launcher_and_config_children(client: FlaskClient) -> None:
    name = "m" * 55  # "<name>-launcher" is 64 characters
    message = denial(client, job("MPIJob", name=name, Launcher=1, Worker=1))
    assert f'the child name "{name}-launcher" would be 64' in message


def test_tfjob_with_both_chief_and_master_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", Chief=1, Master=1, Worker=1))
    assert message.startswith(
        'spec.tfReplicaSpecs: Forbidden: must not have more than one of "Chief", "Master"'
    )


def test_all_errors_are_reported_in_one_message(client: FlaskClient) -> None:
    raw = with_run_policy(job("XGBoostJob", name="Bad", Worker=-1), cleanPodPolicy="x")
    message = denial(client, raw)
    for path in (
        "spec.xgbReplicaSpecs[Worker].replicas",
        "spec.xgbReplicaSpecs:",
        "metadata.name",
        "spec.runPolicy",
    ):
        assert path in message


def test_mxjob_is_allowed_with_a_deprecation_warning(client: FlaskClient) -> None:
    response = validated(client, VALID["MXJob"])
    assert response["allowed"] is True
    assert any("MXJob" in w for w in response["warnings"])


# UPDATE: compared with oldObject, through the real handler (Kubeflow's PyTorch handler compared the new
# object with itself, so these checks never fired for PyTorchJob).


@pytest.mark.parametrize("kind", list(VALID))
def test_update_changing_managed_by_is_denied(client: FlaskClient, kind: str) -> None:
    old = with_run_policy(VALID[kind], managedBy="kueue.x-k8s.io/multikueue")
    new = with_run_policy(VALID[kind], managedBy="kubeflow.org/training-operator")
    message = denial(client, new, "UPDATE", old)
    assert message.startswith(
        'spec.runPolicy.managedBy: Invalid value: "kubeflow.org/training-operator": field is immutable'
    )


def test_update_setting_managed_by_for_the_first_time_is_denied(client: FlaskClient) -> None:
    new = with_run_policy(VALID["PyTorchJob"], managedBy="kueue.x-k8s.io/multikueue")
    assert "spec.runPolicy.managedBy" in denial(client, new, "UPDATE", VALID["PyTorchJob"])


def test_update_changing_the_queue_is_denied(client: FlaskClient) -> None:
    old = with_run_policy(VALID["PyTorchJob"], schedulingPolicy={"queue": "a"})
    new = with_run_policy(VALID["PyTorchJob"], schedulingPolicy={"queue": "b"})
    message = denial(client, new, "UPDATE", old)
    assert message.startswith('spec.runPolicy.schedulingPolicy.queue: Invalid value: "b": field is immutable')


def test_update_adding_a_replica_type_is_denied(client: FlaskClient) -> None:
    old = job("PyTorchJob", Master=1)
    message = denial(client, job("PyTorchJob", Master=1, Worker=2), "UPDATE", old)
    assert message.startswith("spec.pytorchReplicaSpecs: Forbidden: the set of replica types is immutable")


def test_update_scaling_workers_is_allowed(client: FlaskClient) -> None:
    new = job("PyTorchJob", Master=1, Worker=5)
    assert validated(client, new, "UPDATE", VALID["PyTorchJob"])["allowed"] is True


def test_update_with_an_unchanged_spec_is_allowed_even_if_the_spec_is_invalid(client: FlaskClient) -> None:
    # A job admitted before the webhook existed must still accept label and finalizer edits.
    old = job("XGBoostJob", Worker=1)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    assert validated(client, new, "UPDATE", old)["allowed"] is True


def test_create_ignores_an_old_object(client: FlaskClient) -> None:
    old = with_run_policy(VALID["TFJob"], managedBy="kueue.x-k8s.io/multikueue")
    assert validated(client, VALID["TFJob"], "CREATE", old)["allowed"] is True


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_delete_without_an_object_is_allowed_untouched(client: FlaskClient, path: str) -> None:
    review = admission_review(VALID["TFJob"], "DELETE", old=VALID["TFJob"])
    review["request"]["object"] = None
    response = review_response(client, path, review)
    assert response["allowed"] is True
    assert "patch" not in response
