"""The wizard started from a packaged example: the form it fills, the job it makes, the ConfigMap with it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from trainop import examples
from trainop.ui.app import create_app
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings
from trainop.ui.wizard import Form, errors_by_field, examples_of


def example_documents(name: str) -> list[dict]:
    return list(yaml.safe_load_all(examples.example(name).document))


@pytest.mark.parametrize("name", examples.names())
def test_a_form_filled_from_an_example_makes_exactly_that_examples_job(name: str):
    job, problems = Form.of_example(name).job()
    want = copy.deepcopy(example_documents(name)[-1])
    want["metadata"]["namespace"] = "default"
    assert job == want and errors_by_field(job, problems) == {}


def test_a_changed_field_is_written_over_the_example_and_what_the_form_lacks_is_kept():
    values = {**Form.of_example("pytorch").values, "Worker.image": "mine:1", "Worker.gpu": "1"}
    job, _ = Form(values).job()
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["image"] == "mine:1"
    assert worker["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert worker["containers"][0]["env"] == [{"name": "ACCURACY_TARGET", "value": "0.90"}]
    assert worker["volumes"] == [{"name": "example", "configMap": {"name": "pytorch-dist-digits-script"}}]


def test_the_examples_configmap_goes_with_the_job_into_its_namespace():
    form = Form({**Form.of_example("xgboost").values, "namespace": "team-a"})
    job, _ = form.job()
    [config_map] = form.companions(job)
    assert config_map["kind"] == "ConfigMap" and config_map["metadata"] == {
        "name": "xgboost-dist-cancer-script",
        "namespace": "team-a",
    }
    assert "train.py" in config_map["data"]


def test_an_example_of_another_kind_than_the_forms_is_not_used():
    form = Form({**Form.of_example("pytorch").values, "kind": "TFJob", "Worker.replicas": "1"})
    assert form.example is None and form.companions(form.job()[0]) == []


def test_each_kind_is_offered_its_own_examples():
    assert [e.name for e in examples_of("MPIJob")] == ["mpi"]


def client(tmp_path: Path):
    return create_app(Runs(tmp_path / "runs"), UiSettings()).test_client()


def test_the_wizard_offers_to_start_from_the_examples_of_the_chosen_kind(tmp_path: Path):
    page = client(tmp_path).get("/new?kind=JAXJob").text
    assert 'href="/new?kind=JAXJob&amp;example=jax">Start from example: jax</a>' in page


def test_a_wizard_started_from_an_example_is_filled_from_it_and_names_its_configmap(tmp_path: Path):
    page = client(tmp_path).get("/new?kind=PyTorchJob&example=pytorch").text
    assert 'name="Worker.image" value="trainop-examples/pytorch:latest"' in page
    assert 'name="example" value="pytorch"' in page
    assert "the ConfigMap <code>pytorch-dist-digits-script</code>" in page
    assert "Valid: the admission checks accept this job." in page


def test_the_download_of_an_example_holds_its_configmap_then_the_job(tmp_path: Path):
    form = {**Form.of_example("pytorch").values, "do": "download"}
    documents = list(yaml.safe_load_all(client(tmp_path).post("/new", data=form).text))
    assert [d["kind"] for d in documents] == ["ConfigMap", "PyTorchJob"]
    assert documents[0]["metadata"]["name"] == "pytorch-dist-digits-script"
