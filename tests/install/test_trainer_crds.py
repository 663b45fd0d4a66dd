"""The generated Trainer v2 CRDs, without a cluster: structural, named as Trainer names them, and made of
the models' facts and JobSet's types. tests/e2e/test_e2e_trainer_crds.py compares them with Trainer's own."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from tests.install.test_crds import nodes, schema_of
from trainop.api.models import Model
from trainop.install import trainer_crds
from trainop.jsontypes import Json


@pytest.fixture(scope="module")
def generated() -> dict[str, Json]:
    return {crd["spec"]["names"]["kind"]: crd for crd in trainer_crds.trainer_crds()}


def prop(schema: Json, *path: str) -> Json:
    node = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def test_the_three_kinds_are_named_and_scoped_as_trainer_serves_them(generated: dict[str, Json]) -> None:
    shown = {kind: (crd["metadata"]["name"], crd["spec"]["scope"]) for kind, crd in generated.items()}
    assert shown == {
        "TrainJob": ("trainjobs.trainer.kubeflow.org", "Namespaced"),
        "TrainingRuntime": ("trainingruntimes.trainer.kubeflow.org", "Namespaced"),
        "ClusterTrainingRuntime": ("clustertrainingruntimes.trainer.kubeflow.org", "Cluster"),
    }
    assert generated["TrainJob"]["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert "subresources" not in generated["TrainingRuntime"]["spec"]["versions"][0]


def test_every_schema_is_structural(generated: dict[str, Json]) -> None:
    for kind, crd in generated.items():
        for path, node in nodes(schema_of(crd)):
            where = f"{kind}{path}"
            assert not any(key.startswith("trainop:") for key in node), where
            assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{where}: no type"
            if node.get("x-kubernetes-list-type") == "map":
                item = node["items"]
                for key in node["x-kubernetes-list-map-keys"]:
                    assert key in item.get("required", ()) or "default" in item["properties"][key], where


def test_a_fields_crd_facts_land_on_its_node(generated: dict[str, Json]) -> None:
    managed_by = prop(schema_of(generated["TrainJob"]), "spec", "managedBy")
    assert managed_by["default"] == "trainer.kubeflow.org/trainjob-controller"
    assert [r["rule"] for r in managed_by["x-kubernetes-validations"]] == [
        "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
        "self == oldSelf",
    ]
    command = prop(schema_of(generated["TrainJob"]), "spec", "trainer", "command")
    assert (command["maxItems"], command["items"]["maxLength"]) == (128, 1048576)


def test_a_runtimes_template_spec_is_jobsets_own_spec(generated: dict[str, Json]) -> None:
    for kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        spec = prop(schema_of(generated[kind]), "spec", "template", "spec")
        jobset = trainer_crds.jobset_spec_schema()
        assert {**spec, "description": jobset["description"]} == jobset


def test_a_trainers_env_is_the_containers_env_of_jobsets_pod_template(generated: dict[str, Json]) -> None:
    env = prop(schema_of(generated["TrainJob"]), "spec", "trainer", "env")
    container_env = trainer_crds.kube_schema(
        "replicatedJobs.items.template.spec.template.spec.containers.items.env"
    )
    assert {k: v for k, v in env.items() if k not in ("maxItems", "description")} == {
        k: v for k, v in container_env.items() if k != "description"
    }
    assert env["maxItems"] == 128


def test_an_untyped_json_field_without_its_schema_named_is_an_error() -> None:
    class Loose(Model):
        anything: dict[str, Any] | None = Field(default=None, description="Whatever.")

    with pytest.raises(ValueError, match="an untyped object needs"):
        trainer_crds.model_schema(Loose)
