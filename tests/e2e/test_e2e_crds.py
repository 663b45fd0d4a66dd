"""CRDs on a real apiserver: server-side apply, Established, categories, printer columns, kubectl explain."""

from __future__ import annotations

import json

import pytest
from trainop_stack import CRDS_DIR, GROUP, KINDS, TrainopStack

pytestmark = pytest.mark.e2e

CRD_NAMES = [f"{info['plural']}.{GROUP}" for info in KINDS.values()]
SCALABLE = {"PyTorchJob", "PaddleJob", "JAXJob"}


def test_crds_apply_server_side_and_are_established(stack: TrainopStack) -> None:
    # The session already installed them (field manager "e2e"); a user's re-apply must not conflict.
    res = stack.kubectl("apply", "--server-side", "-f", str(CRDS_DIR))
    for name in CRD_NAMES:
        assert f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied" in res.stdout
    stack.kubectl("wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in CRD_NAMES])
    crds = {
        c["metadata"]["name"]: c
        for c in json.loads(stack.kubectl("get", "crd", "-o", "json").stdout)["items"]
    }
    for kind, info in KINDS.items():
        crd = crds[f"{info['plural']}.{GROUP}"]
        assert crd["spec"]["scope"] == "Namespaced"
        assert crd["spec"]["names"]["kind"] == kind
        assert "kubeflow" in crd["spec"]["names"].get("categories", [])
        (version,) = crd["spec"]["versions"]
        assert version["name"] == "v1"
        columns = [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]]
        assert ("State", ".status.conditions[-1:].type") in columns
        assert ("Age", ".metadata.creationTimestamp") in columns
        assert "status" in version["subresources"]
        if kind in SCALABLE:
            assert (
                version["subresources"]["scale"]["specReplicasPath"]
                == f".spec.{info['field']}.Worker.replicas"
            )
        else:
            assert "scale" not in version["subresources"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_kubectl_explain_reaches_pod_template_containers(stack: TrainopStack, kind: str) -> None:
    field = KINDS[kind]["field"]
    # Each canonical replica type is a property of the map, so explain walks `...ReplicaSpecs.Worker...`.
    res = stack.kubectl("explain", f"{kind.lower()}.spec.{field}")
    assert "Worker\t<Object>" in res.stdout
    res = stack.kubectl("explain", f"{kind.lower()}.spec.{field}.Worker.template.spec.containers")
    assert "FIELD: containers <[]Object>" in res.stdout
    assert "image\t<string>" in res.stdout
    res = stack.kubectl(
        "explain", f"{kind.lower()}.spec.{field}.Worker.template.spec.containers.resources.limits"
    )
    assert "FIELD: limits <map[string]Object>" in res.stdout
