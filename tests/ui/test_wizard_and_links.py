"""Where the wizard puts a message about a field path, and how configured links are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainop.ui.links import Link, load_links
from trainop.ui.wizard import FORM, Form, errors_by_field, field_of


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("metadata.name", "name"),
        ("spec.runPolicy.backoffLimit", "backoffLimit"),
        ("spec.pytorchReplicaSpecs[Worker].replicas", "Worker.replicas"),
        ("spec.pytorchReplicaSpecs[Master].template.spec.containers[0].image", "Master.image"),
        ("spec.tfReplicaSpecs[PS].template.spec.containers[0].resources.limits.nvidia.com/gpu", "PS.gpu"),
        ("spec.pytorchReplicaSpecs[Worker].template.spec.volumes[0]", FORM),
        ("spec.elasticPolicy.minReplicas", FORM),
        ("metadata.annotations[trainop.dev/accelerator.Worker]", "Worker.accelerator"),
    ],
)
def test_a_field_path_goes_to_the_form_field_it_names(path: str, field: str):
    assert field_of(path) == field


def test_an_empty_replicas_field_leaves_that_replica_type_out():
    job, problems = Form(
        {"kind": "PyTorchJob", "name": "a", "Worker.replicas": "2", "Master.replicas": ""}
    ).job()
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Worker"] and problems == {}


def test_a_command_is_split_into_words_as_a_shell_would():
    job, _ = Form(
        {"kind": "JAXJob", "name": "a", "Worker.replicas": "1", "Worker.command": "python3 -c 'print(1)'"}
    ).job()
    assert job["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"] == [
        "python3", "-c", "print(1)",
    ]  # fmt: skip


def accelerated(profile: str, count: str = "") -> Form:
    return Form({
        "kind": "PyTorchJob", "name": "a", "Worker.replicas": "2", "Worker.image": "python:3.11",
        "Worker.accelerator": profile, "Worker.acceleratorCount": count,
    })  # fmt: skip


def test_a_chosen_accelerator_profile_and_count_become_the_replica_types_annotation():
    job, problems = accelerated("nvidia-gke-l4", "2").job()
    assert job["metadata"]["annotations"] == {"trainop.dev/accelerator.Worker": "nvidia-gke-l4:2"}
    assert errors_by_field(job, problems) == {}


def test_an_unknown_accelerator_profile_is_refused_at_the_accelerator_field():
    job, problems = accelerated("no-such-gpu").job()
    [message] = errors_by_field(job, problems)["Worker.accelerator"]
    assert '"no-such-gpu": unknown accelerator profile' in message


def test_a_device_count_without_a_profile_is_refused_at_the_accelerator_field():
    _, problems = accelerated("", "4").job()
    assert problems == {"Worker.accelerator": ["pick a profile for the count"]}


def test_a_link_reaches_label_keys_with_dots_and_quotes_the_value():
    link = Link("logs", "job", "https://logs/?q=${metadata.labels['app.kubernetes.io/name']}")
    assert link.expand({"metadata": {"labels": {"app.kubernetes.io/name": "a b"}}}) == "https://logs/?q=a%20b"


def test_a_link_without_a_url_is_refused_naming_its_index(tmp_path: Path):
    path = tmp_path / "links.yaml"
    path.write_text("- {name: ok, url: 'https://x'}\n- {name: bad}\n")
    with pytest.raises(ValueError, match=r"links\[1\]\.url: required"):
        load_links(path)
