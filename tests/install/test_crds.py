"""The generated CRDs: committed, structural, complete, and what the generator produces today."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from trainop.cli import main
from trainop.frameworks import KINDS
from trainop.frameworks.tensorflow import TFJOB
from trainop.install import crds
from trainop.jsontypes import Json

ROOT = Path(__file__).resolve().parents[2]
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture(scope="module")
def committed() -> dict[str, Json]:
    """Kind -> the CRD as committed in manifests/crds/ (parsed once: they are large)."""
    out = {}
    for info in KINDS.values():
        text = (ROOT / "manifests" / "crds" / crds.crd_filename(info)).read_text()
        out[info.kind] = yaml.load(text, Loader=Loader)
    return out


def schema_of(crd: Json) -> Json:
    schema: Json = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def nodes(schema: Json, path: str = "") -> Iterator[tuple[str, Json]]:
    """Every schema node with its path, the way the apiserver's structural check visits them."""
    yield path, schema
    for name, prop in schema.get("properties", {}).items():
        yield from nodes(prop, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


def test_every_kind_has_a_committed_crd_with_kubeflow_names(committed: dict[str, Json]) -> None:
    for info in KINDS.values():
        crd = committed[info.kind]
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["metadata"]["name"] == f"{info.plural}.kubeflow.org"
        spec = crd["spec"]
        assert spec["group"] == "kubeflow.org"
        assert spec["scope"] == "Namespaced"
        assert spec["names"] == {
            "categories": ["kubeflow"],
            "kind": info.kind,
            "listKind": f"{info.kind}List",
            "plural": info.plural,
            "singular": info.singular,
        }
        [version] = spec["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)


def test_subresources_and_printer_columns(committed: dict[str, Json]) -> None:
    for info in KINDS.values():
        version = committed[info.kind]["spec"]["versions"][0]
        assert version["additionalPrinterColumns"] == [
            {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
            {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        ]
        sub = version["subresources"]
        assert sub["status"] == {}
        if info.scalable:
            assert sub["scale"] == {
                "specReplicasPath": f".spec.{info.replica_field}.Worker.replicas",
                "statusReplicasPath": ".status.replicaStatuses.Worker.active",
                "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
            }
        else:
            assert "scale" not in sub
    assert {k for k, i in KINDS.items() if i.scalable} == {"PyTorchJob", "PaddleJob", "JAXJob"}


def test_schemas_are_structural(committed: dict[str, Json]) -> None:
    for kind, crd in committed.items():
        for path, node in nodes(schema_of(crd)):
            where = f"{kind}{path}"
            assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, where
            assert "nullable" not in node, where
            assert (
                "type" in node
                or node.get("x-kubernetes-int-or-string")
                or node.get("x-kubernetes-preserve-unknown-fields")
            ), f"{where}: no type"
            if "anyOf" in node:
                # The one logical junctor a structural schema may carry: int-or-string.
                assert node.get("x-kubernetes-int-or-string"), where
                assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], where
            if node.get("x-kubernetes-preserve-unknown-fields"):
                assert node.get("type") == "object", where
            assert not isinstance(node.get("additionalProperties"), bool), where
            assert not ("properties" in node and "additionalProperties" in node), where
            if node.get("x-kubernetes-list-type") == "map":
                item = node["items"]
                for key in node["x-kubernetes-list-map-keys"]:
                    assert key in item.get("required", ()) or "default" in item["properties"][key], where


def test_spec_requires_the_replica_map_and_carries_kubeflow_schema_rules(committed: dict[str, Json]) -> None:
    for info in KINDS.values():
        spec = schema_of(committed[info.kind])["properties"]["spec"]
        assert spec["required"] == [info.replica_field]
        run_policy = spec["properties"]["runPolicy"]["properties"]
        assert run_policy["suspend"]["default"] is False
        assert run_policy["schedulingPolicy"]["properties"]["queue"]["x-kubernetes-validations"] == [
            {"rule": "self == oldSelf", "message": "spec.runPolicy.schedulingPolicy.queue is immutable"}
        ]


def test_defaults_only_where_kubeflow_or_list_map_keys_need_them(committed: dict[str, Json]) -> None:
    # A CRD default is persisted into every job; built-in zero values must not leak in.
    defaults = {path for path, node in nodes(schema_of(committed["TFJob"])) if "default" in node}
    assert defaults == {
        ".spec.runPolicy.suspend",
        *(
            f".spec.tfReplicaSpecs.{rtype}.template.spec.{containers}[].ports[].protocol"
            for rtype in TFJOB.replica_types
            for containers in ("containers", "initContainers", "ephemeralContainers")
        ),
        *(
            f".spec.tfReplicaSpecs.{rtype}.template.spec.imagePullSecrets[].name"
            for rtype in TFJOB.replica_types
        ),
    }


def test_each_replica_type_is_a_property_so_kubectl_explain_can_walk_it(committed: dict[str, Json]) -> None:
    for info in KINDS.values():
        replica_map = schema_of(committed[info.kind])["properties"]["spec"]["properties"][info.replica_field]
        assert list(replica_map["properties"]) == sorted(info.replica_types)
        # Unknown or lower-case keys are kept for defaulting to fix and validation to reject by name.
        assert replica_map["x-kubernetes-preserve-unknown-fields"] is True
        assert "additionalProperties" not in replica_map


def test_only_worker_keeps_the_pod_template_descriptions_to_bound_the_crd_size(
    committed: dict[str, Json],
) -> None:
    replica_map = schema_of(committed["TFJob"])["properties"]["spec"]["properties"]["tfReplicaSpecs"]
    assert (
        "description" in replica_map["properties"]["Worker"]["properties"]["template"]["properties"]["spec"]
    )
    assert (
        "description" not in replica_map["properties"]["PS"]["properties"]["template"]["properties"]["spec"]
    )
    largest = max(len(json.dumps(crd, separators=(",", ":"))) for crd in committed.values())
    assert largest < 1024 * 1024  # etcd stores a CRD as one object of at most 1.5 MiB


def test_pod_template_is_kubernetes_own_schema(committed: dict[str, Json]) -> None:
    for info in KINDS.values():
        replica = schema_of(committed[info.kind])["properties"]["spec"]["properties"][info.replica_field]
        template = replica["properties"]["Worker"]["properties"]["template"]
        containers = template["properties"]["spec"]["properties"]["containers"]
        assert template["properties"]["spec"]["required"] == ["containers"]
        assert containers["type"] == "array"
        assert containers["x-kubernetes-list-type"] == "map"
        assert containers["x-kubernetes-list-map-keys"] == ["name"]
        container = containers["items"]
        assert container["required"] == ["name"]
        assert container["properties"]["image"]["type"] == "string"
        limits = container["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
        assert limits["x-kubernetes-int-or-string"] is True and "pattern" in limits
        metadata = template["properties"]["metadata"]
        assert metadata["x-kubernetes-preserve-unknown-fields"] is True
        assert metadata["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert crds.pod_template_source()["module"] == "k8s.io/kubernetes@v1.36.3"


def test_status_accepts_what_metacontroller_writes(committed: dict[str, Json]) -> None:
    status = schema_of(committed["PyTorchJob"])["properties"]["status"]
    assert status["properties"]["observedGeneration"]["type"] == "integer"
    assert status["properties"]["replicaStatuses"]["additionalProperties"]["properties"]["selector"] == {
        "description": "Label selector of the pods, for the scale subresource.",
        "type": "string",
    }
    assert status["properties"]["conditions"]["items"]["required"] == ["status", "type"]


def test_committed_files_match_the_generator() -> None:
    # Fails after a change to trainop/api/models.py, a framework module or the pod template schema until
    # `trainop crds --write` is run; covers manifests/crds/, charts/trainop/crds/ and the generated manifests.
    assert crds.differing(ROOT) == []
    for info in KINDS.values():
        name = crds.crd_filename(info)
        assert (ROOT / "charts/trainop/crds" / name).read_text() == (
            ROOT / "manifests/crds" / name
        ).read_text()


def test_check_reports_drift_and_write_repairs_it(tmp_path: Path) -> None:
    for rel, text in crds.generated_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert main(["crds", "--check", "--root", str(tmp_path)]) == 0
    tfjobs = tmp_path / "charts/trainop/crds/kubeflow.org_tfjobs.yaml"
    tfjobs.write_text(tfjobs.read_text().replace("State", "Status"))
    (tmp_path / "manifests/crds/kubeflow.org_oldjobs.yaml").write_text("stale\n")
    assert crds.differing(tmp_path) == [
        "charts/trainop/crds/kubeflow.org_tfjobs.yaml",
        "manifests/crds/kubeflow.org_oldjobs.yaml",
    ]
    assert main(["crds", "--check", "--root", str(tmp_path)]) == 1
    assert main(["crds", "--write", "--root", str(tmp_path)]) == 0
    assert crds.differing(tmp_path) == []
    assert not (tmp_path / "manifests/crds/kubeflow.org_oldjobs.yaml").exists()


def test_cli_prints_every_crd_as_one_stream() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["crds"]) == 0
    docs = [d for d in yaml.load_all(out.getvalue(), Loader=Loader) if d is not None]
    assert [d["spec"]["names"]["kind"] for d in docs] == list(KINDS)
    assert all(d["kind"] == "CustomResourceDefinition" for d in docs)
    # One schema object is shared between places; YAML anchors (&id001) would make the files unreadable.
    assert "&id" not in out.getvalue()
