"""The structural-schema check `trainop run` applies where a cluster's apiserver would."""

from __future__ import annotations

import pytest

from tests.builders import container, job, replica, with_run_policy
from trainop import examples
from trainop.admission.defaults import apply_defaults
from trainop.install.schema import schema_errors


def messages(obj: dict) -> list[str]:
    return [str(e) for e in schema_errors(apply_defaults(obj))]


def test_a_valid_job_has_no_schema_errors() -> None:
    assert messages(job("PyTorchJob", Master=1, Worker=2)) == []


@pytest.mark.parametrize("name", examples.names())
def test_every_example_passes_the_schema(name: str) -> None:
    assert messages(examples.example(name).job) == []


def test_a_misspelt_container_field_is_an_unknown_field() -> None:
    typo = replica("PyTorchJob", 1, [container("pytorch", comand=["python"])])
    assert messages(job("PyTorchJob", Master=typo)) == [
        'spec.pytorchReplicaSpecs.Master.template.spec.containers[0].comand: unknown field "comand"; '
        "check its spelling and indentation"
    ]


def test_a_misspelt_run_policy_field_is_an_unknown_field() -> None:
    out = messages(with_run_policy(job("JAXJob", Worker=1), backofLimit=3))
    assert out == [
        'spec.runPolicy.backofLimit: unknown field "backofLimit"; check its spelling and indentation'
    ]


def test_a_wrong_type_deep_in_the_pod_template_names_its_path() -> None:
    bad = replica("JAXJob", 1, [container("jax", ports=[{"containerPort": "abc"}])])
    assert messages(job("JAXJob", Worker=bad)) == [
        "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].ports[0].containerPort: "
        'Invalid value: "abc": must be of type integer'
    ]


def test_quantities_take_integers_or_strings_but_not_booleans() -> None:
    ok = replica("JAXJob", 1, [container("jax", resources={"limits": {"cpu": 2, "memory": "1Gi"}})])
    assert messages(job("JAXJob", Worker=ok)) == []
    bad = replica("JAXJob", 1, [container("jax", resources={"limits": {"cpu": True}})])
    assert messages(job("JAXJob", Worker=bad)) == [
        "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].resources.limits.cpu: Invalid value: true: "
        "must be an integer or a string"
    ]


def test_a_container_without_a_name_is_missing_a_required_field() -> None:
    nameless = replica("JAXJob", 1, [{"image": "x"}])
    assert "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].name: Required value" in messages(
        job("JAXJob", Worker=nameless)
    )


def test_unknown_replica_types_are_left_to_validation_which_names_them() -> None:
    assert messages(job("PyTorchJob", Master=1, Chief=1)) == []
