"""The real JobSet controller on the e2e control plane: the controller a TrainJob's JobSet is run by.

A JobSet is applied as a TrainJob's hook will return it; JobSet's own webhooks default and check it,
its controller makes one batch Job per replicated job and replica and a headless Service for the pods'
hostnames, the controller-manager's Job controller makes the pods, kwok runs them
(tests/e2e/kwok-stages.yaml), and the JobSet ends Completed or Failed by JobSet's own rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jobset_controller import JOBSET_NAME_LABEL, running_jobset
from trainop_stack import IMAGE, Namespace, TrainopStack, kwok_annotations

pytestmark = pytest.mark.e2e

JOBSET_API = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture(scope="module", autouse=True)
def jobset(stack: TrainopStack) -> Iterator[None]:
    with running_jobset(stack.cp):
        yield


def replicated_job(name: str, replicas: int, pods: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"annotations": annotations},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "node", "image": IMAGE}],
                    },
                },
            }
        },
    }


def jobset_of(name: str, *replicated: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": list(replicated)},
    }


def conditions(ns: Namespace, name: str) -> dict[str, str]:
    status = ns.get(f"jobset/{name}").get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_jobset_makes_a_job_per_replica_and_completes_when_they_succeed(namespace: Namespace) -> None:
    ns = namespace
    ok = kwok_annotations(outcome="Succeeded", run_for="1s")
    ns.apply(jobset_of("train", replicated_job("launcher", 1, 1, ok), replicated_job("node", 2, 2, ok)))

    ns.wait_until(
        "the JobSet Completed", lambda: conditions(ns, "train").get("Completed") == "True", timeout=90
    )

    jobs = {j["metadata"]["name"] for j in ns.items("jobs", f"{JOBSET_NAME_LABEL}=train")}
    assert jobs == {"train-launcher-0", "train-node-0", "train-node-1"}
    pods = ns.items("pods", f"{JOBSET_NAME_LABEL}=train")
    assert len(pods) == 5
    # JobSet's pod webhook gives each pod the hostname and subdomain its headless Service resolves.
    assert {p["spec"]["subdomain"] for p in pods} == {"train"}
    assert ns.get("service/train")["spec"]["clusterIP"] == "None"


def test_jobset_fails_when_a_job_fails_and_no_failure_policy_restarts_it(namespace: Namespace) -> None:
    ns = namespace
    ok = kwok_annotations(outcome="Succeeded", run_for="30s")
    failing = kwok_annotations(outcome="Failed", run_for="1s", exit_code=1)
    ns.apply(jobset_of("broken", replicated_job("launcher", 1, 1, failing), replicated_job("node", 1, 1, ok)))

    ns.wait_until("the JobSet Failed", lambda: conditions(ns, "broken").get("Failed") == "True", timeout=90)

    assert conditions(ns, "broken").get("Completed") != "True"


def test_jobset_admission_refuses_two_replicated_jobs_of_one_name(namespace: Namespace) -> None:
    bad = jobset_of("bad", replicated_job("node", 1, 1, {}))
    bad["spec"]["replicatedJobs"].append(replicated_job("node", 1, 1, {}))

    result = namespace.apply(bad, check=False)

    assert result.returncode != 0
    assert 'spec.replicatedJobs[1]: Duplicate value: {"name":"node"}' in result.stderr


def test_jobset_admission_defaults_hostnames_and_success_policy(namespace: Namespace) -> None:
    namespace.apply(
        jobset_of("plain", replicated_job("node", 1, 1, kwok_annotations(outcome=None, run_for=None)))
    )

    spec = namespace.get("jobset/plain")["spec"]

    assert spec["network"]["enableDNSHostnames"] is True
    assert spec["successPolicy"]["operator"] == "All"
