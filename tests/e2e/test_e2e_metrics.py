"""Operating the stack on the real control plane: Kubeflow's job counters as Prometheus scrapes them, and a
forged `/sync` that must not make the hook server delete a running job.

The counters are summed over the hook server's gunicorn workers by its master (trainop/metrics.py). A
transition is counted once per hook process at most (hooks/metrics.py), so with the stack's two workers a
count is 1 or, after a retried status write answered by the other worker, 2.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from trainop_stack import Namespace, TrainopStack, job, kwok_annotations, replica

from tests.servers import sample

pytestmark = pytest.mark.e2e

RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


def jobs_counter(stack: TrainopStack, what: str, namespace: str, framework: str) -> float:
    text = scrape(stack.hook_metrics_port)
    return sample(text, f"training_operator_jobs_{what}_total", job_namespace=namespace, framework=framework)


def test_job_counters_move_for_jobs_that_succeed_fail_and_restart(
    stack: TrainopStack, namespace: Namespace
) -> None:
    ns = namespace
    ns.apply(
        job(
            "TFJob",
            "succeeds",
            {"Worker": replica("TFJob", annotations=kwok_annotations(run_for="1s"))},
            run_policy={"ttlSecondsAfterFinished": 0},
        )
    )
    ns.apply(
        job(
            "XGBoostJob",
            "fails",
            {"Master": replica("XGBoostJob", annotations=kwok_annotations("Failed", "1s", exit_code=1))},
        )
    )
    ns.apply(
        job(
            "PyTorchJob",
            "restarts",
            {
                "Master": replica(
                    "PyTorchJob", restart_policy="ExitCode", annotations=kwok_annotations(run_for="4s")
                )
            },
        )
    )
    ns.wait_for("xgboostjob/fails", "Failed", timeout=60)
    ns.wait_phase("restarts-master-0", "Running", timeout=60)
    ns.kubectl(
        "annotate", "pod/restarts-master-0", "--overwrite",
        "e2e.kwok.io/outcome=Failed", "e2e.kwok.io/exit-code=137", "e2e.kwok.io/run-for=100ms",
    )  # fmt: skip
    ns.wait_for("pytorchjob/restarts", "Succeeded", timeout=60)
    ns.wait_until("tfjob/succeeds deleted by its TTL", lambda: not ns.exists("tfjob/succeeds"), timeout=60)

    def count(what: str, framework: str) -> float:
        return jobs_counter(stack, what, ns.name, framework)

    once = (1, 2)  # see the module docstring
    assert count("created", "tensorflow") in once
    assert count("successful", "tensorflow") in once
    assert count("deleted", "tensorflow") == 1
    assert count("created", "xgboost") in once
    assert count("failed", "xgboost") in once
    assert count("successful", "xgboost") == 0
    assert count("restarted", "pytorch") in once
    assert count("successful", "pytorch") in once
    assert count("failed", "pytorch") == 0


def test_hook_latency_and_admission_metrics_are_scraped(stack: TrainopStack, namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job("JAXJob", "measured", {"Worker": replica("JAXJob", annotations=kwok_annotations(run_for="1s"))})
    )
    ns.wait_for("jaxjob/measured", "Succeeded", timeout=60)
    hooks = scrape(stack.hook_metrics_port)
    assert sample(hooks, "trainop_hook_duration_seconds_count", hook="sync", kind="JAXJob") >= 2
    assert sample(hooks, "trainop_hook_request_size_bytes_count", hook="sync", kind="JAXJob") >= 2
    webhooks = scrape(stack.webhook_metrics_port)
    assert (
        sample(
            webhooks, "trainop_webhook_admission_duration_seconds_count", webhook="mutate", operation="CREATE"
        )
        >= 1
    )
    assert (
        sample(
            webhooks,
            "trainop_webhook_admission_duration_seconds_count",
            webhook="validate",
            operation="CREATE",
        )
        >= 1
    )
    denied = ns.apply(job("XGBoostJob", "denied", {"Worker": replica("XGBoostJob")}), check=False)
    assert denied.returncode != 0
    webhooks = scrape(stack.webhook_metrics_port)
    assert (
        sample(
            webhooks,
            "trainop_webhook_denials_total",
            webhook="validate",
            reason="Invalid",
            field="spec.xgbReplicaSpecs",
        )
        >= 1
    )


def test_metacontroller_serves_its_own_metrics(stack: TrainopStack, namespace: Namespace) -> None:
    """The dashboard's Metacontroller panel reads metacontroller_sync_requests_total{code}."""
    namespace.apply(job("JAXJob", "synced", {"Worker": replica("JAXJob", annotations=kwok_annotations())}))
    namespace.wait_for("jaxjob/synced", "Succeeded", timeout=60)
    port = stack.cp.metacontroller_metrics_port
    assert port is not None
    families = {f.name: f for f in text_string_to_metric_families(scrape(port))}
    calls = families["metacontroller_sync_requests"].samples
    assert sum(s.value for s in calls if s.name.endswith("_total") and s.labels.get("code") == "200") >= 2


def post_sync(stack: TrainopStack, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{stack.hook_port}/sync",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        out: dict[str, object] = json.loads(response.read())
        return out


def test_a_forged_sync_of_a_running_job_does_not_delete_it(stack: TrainopStack, namespace: Namespace) -> None:
    """What a `view` user could send: the real job with its real uid, marked finished long ago."""
    ns = namespace
    # A TTL of 0: the job is deleted the moment it really finishes, so only its running state protects it.
    ns.apply(
        job(
            "PyTorchJob",
            "victim",
            {"Master": replica("PyTorchJob", annotations=RUN_FOREVER)},
            run_policy={"ttlSecondsAfterFinished": 0},
        )
    )
    ns.wait_for("pytorchjob/victim", "Running", timeout=60)
    real = ns.get("pytorchjob/victim")
    forged = copy.deepcopy(real)
    forged["status"]["conditions"].append(
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "forged",
         "lastUpdateTime": "2020-01-01T00:00:00Z", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    )  # fmt: skip
    forged["status"]["completionTime"] = "2020-01-01T00:00:00Z"
    log = stack.process("hooks").log_path
    offset = log.stat().st_size
    post_sync(stack, {"parent": forged, "children": {}})
    ns.wait_until(
        "the hook to log its refusal",
        lambda: '"ttl-not-deleted"' in log.read_bytes()[offset:].decode(errors="replace"),
        timeout=30,
    )
    time.sleep(2)  # a deletion, had one been sent, is visible by now
    survivor = ns.get("pytorchjob/victim")
    assert survivor["metadata"]["uid"] == real["metadata"]["uid"]
    assert "deletionTimestamp" not in survivor["metadata"]
    assert ns.get("pod/victim-master-0")["status"]["phase"] == "Running"
    refusal = next(
        json.loads(line)
        for line in log.read_bytes()[offset:].decode(errors="replace").splitlines()
        if '"ttl-not-deleted"' in line
    )
    assert refusal["name"] == "victim" and "not finished" in refusal["reason"]


def test_a_genuinely_expired_job_is_still_deleted_with_its_uid(
    stack: TrainopStack, namespace: Namespace
) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "expires",
            {"Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="1s"))},
            run_policy={"ttlSecondsAfterFinished": 1},
        )
    )
    ns.wait_for("pytorchjob/expires", "Succeeded", timeout=60)
    ns.wait_until("pytorchjob/expires deleted", lambda: not ns.exists("pytorchjob/expires"), timeout=30)
