"""Every kind's packaged example job (trainop/examples/<framework>/) on the cluster: admitted, defaulted,
Succeeded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from trainop_stack import KINDS, Namespace, example_job, kwok_annotations

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def examples(module_namespace: Namespace) -> Iterator[dict[str, dict[str, Any]]]:
    """kind -> the example as applied (all kinds in one namespace, applied once per module)."""
    applied = {kind: example_job(kind, kwok_annotations("Succeeded", "1s")) for kind in KINDS}
    for obj in applied.values():
        module_namespace.apply(obj)
    yield applied


def _ref(kind: str, obj: dict[str, Any]) -> str:
    return f"{KINDS[kind]['plural']}.kubeflow.org/{obj['metadata']['name']}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_example_is_admitted_with_defaults_persisted(
    module_namespace: Namespace, examples: dict[str, dict[str, Any]], kind: str
) -> None:
    info, source = KINDS[kind], examples[kind]
    stored = module_namespace.get(_ref(kind, source))
    spec = stored["spec"]
    run_policy = spec["runPolicy"]
    want_clean = (source["spec"].get("runPolicy") or {}).get("cleanPodPolicy") or "None"
    assert run_policy["cleanPodPolicy"] == want_clean
    assert run_policy["suspend"] is False
    if kind == "MPIJob":
        assert spec["cleanPodPolicy"] == want_clean  # the legacy top-level copy is kept in step
    if kind == "PyTorchJob":
        assert spec["nprocPerNode"] == "auto"
    if kind == "TFJob":
        assert spec["successPolicy"] == ""
    replicas = spec[info["field"]]
    assert set(replicas) == set(source["spec"][info["field"]])
    for rtype, rspec in replicas.items():
        given = source["spec"][info["field"]][rtype]
        default_replicas = 0 if (kind, rtype) == ("MPIJob", "Worker") else 1
        assert rspec["replicas"] == given.get("replicas", default_replicas), rtype
        assert rspec["restartPolicy"] == (given.get("restartPolicy") or info["restart"]), rtype
        containers = {c["name"]: c for c in rspec["template"]["spec"]["containers"]}
        ports = {p["name"]: p["containerPort"] for p in containers[info["container"]].get("ports", [])}
        if info["port"] is None:
            assert ports == {}, f"{kind} gets no default port"
        else:
            name, number = info["port"]
            assert ports.get(name) == number, f"{rtype}: default port {name}:{number} missing in {ports}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_example_runs_to_succeeded(
    module_namespace: Namespace, examples: dict[str, dict[str, Any]], kind: str
) -> None:
    ref = _ref(kind, examples[kind])
    module_namespace.wait_for(ref, "Succeeded", timeout=90)
    status = module_namespace.get(ref)["status"]
    assert status["completionTime"] >= status["startTime"]
    assert [c["type"] for c in status["conditions"] if c["status"] == "True"][-1] == "Succeeded"


def test_get_kubeflow_lists_every_kind_with_state_and_age(
    module_namespace: Namespace, examples: dict[str, dict[str, Any]]
) -> None:
    for kind, obj in examples.items():
        module_namespace.wait_for(_ref(kind, obj), "Succeeded", timeout=90)
    out = module_namespace.kubectl("get", "kubeflow").stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    headers = [cols for cols in lines if cols[0] == "NAME"]
    assert headers and all(h == ["NAME", "STATE", "AGE"] for h in headers), out
    rows = {cols[0]: cols[1:] for cols in lines if cols[0] != "NAME"}
    for kind, obj in examples.items():
        row = rows.get(f"{kind.lower()}.kubeflow.org/{obj['metadata']['name']}")
        assert row is not None, f"{kind} missing from `kubectl get kubeflow`:\n{out}"
        state, age = row
        assert state == "Succeeded"
        assert re.fullmatch(r"\d+(s|m\d*s?)", age), age
    assert len(rows) == len(KINDS)
