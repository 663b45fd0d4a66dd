"""The deliberate-differences list, its selectors, the README block, the snapshot comparison rules and
the rules for Kubeflow's own randomness.

These need no cluster; the differential run itself is test_differential.py.
"""

from __future__ import annotations

from typing import Any

import deliberate
import noise
import normalize
import pytest
from cases import edge_cases, rewrite_for_kwok
from diff import ABSENT, Difference, diff
from harness import Compared, Differential, compare
from runner import Run
from trainop_stack import IMAGE

ENTRY = {"id": "x", "what": "w", "kubeflow": "k", "trainop": "t", "why": "y"}


def entry(**match: Any) -> deliberate.Entry:
    (parsed,) = deliberate.parse([{**ENTRY, "match": [match]}])
    return parsed


def explain(e: deliberate.Entry, path: str, case: str = "c", checkpoint: str = "p",
            kubeflow: Any = "a", trainop: Any = "b") -> str | None:  # fmt: skip
    return deliberate.explain([e], case, checkpoint, path, kubeflow, trainop)


# ---------------------------------------------------------------------------------------------- the list
def test_readme_block_is_rendered_from_the_list() -> None:
    text = deliberate.README.read_text()
    assert deliberate.readme_block(text) == deliberate.render(deliberate.load()), (
        "README.md's deliberate-differences block is stale: run "
        "python tests/differential/deliberate.py --write-readme"
    )


def test_the_list_parses() -> None:
    assert deliberate.load()


def test_an_entry_without_a_field_is_rejected_with_its_id() -> None:
    with pytest.raises(deliberate.ListError, match=r"entry #0 \(x\): missing or empty \['why'\]"):
        deliberate.parse([{k: v for k, v in ENTRY.items() if k != "why"}])


def test_duplicate_ids_are_rejected() -> None:
    with pytest.raises(deliberate.ListError, match="duplicate ids"):
        deliberate.parse([ENTRY, ENTRY])


def test_a_selector_starting_with_a_wildcard_is_rejected() -> None:
    with pytest.raises(deliberate.ListError, match="starts with a wildcard"):
        entry(path="*.reason", case="c")


def test_a_wildcard_path_needs_a_case_or_a_value() -> None:
    with pytest.raises(deliberate.ListError, match="add a 'case'"):
        entry(path="events[*")


def test_unknown_selector_keys_are_rejected() -> None:
    with pytest.raises(deliberate.ListError, match=r"unknown keys \['paths'\]"):
        entry(path="job.status", paths="x")


# ---------------------------------------------------------------------------------------------- selectors
def test_a_selector_matches_path_case_checkpoint_and_values() -> None:
    e = entry(path="job.status.conditions[Failed].reason", case="mpi-*", checkpoint="launcher-failed",
              kubeflow="MPIJobMPIJobFailed", trainop="MPIJobFailed")  # fmt: skip
    path = "job.status.conditions[Failed].reason"
    assert (
        explain(e, path, "mpi-launcher-fails", "launcher-failed", "MPIJobMPIJobFailed", "MPIJobFailed") == "x"
    )
    assert explain(e, path, "tf-x", "launcher-failed", "MPIJobMPIJobFailed", "MPIJobFailed") is None
    assert explain(e, path, "mpi-launcher-fails", "running", "MPIJobMPIJobFailed", "MPIJobFailed") is None
    assert explain(e, path, "mpi-launcher-fails", "launcher-failed", "MPIJobMPIJobFailed", "Other") is None


def test_brackets_in_a_selector_are_literal() -> None:
    e = entry(path="job.status.conditions[Failed].reason")
    assert explain(e, "job.status.conditions[Failed].reason") == "x"
    assert explain(e, "job.status.conditions[F].reason") is None


def test_star_matches_any_run_of_characters() -> None:
    e = entry(path="events[Normal SuccessfulCreatePod: Created pod: *]", trainop=ABSENT)
    assert explain(e, "events[Normal SuccessfulCreatePod: Created pod: j-worker-0]", trainop=ABSENT) == "x"
    assert (
        explain(e, "events[Normal SuccessfulCreatePod: Created pod: j-worker-0]", trainop="present") is None
    )


# ---------------------------------------------------------------------------------------------- comparison
def snap(children: dict[str, Any] | None = None, **job: Any) -> dict[str, Any]:
    return {
        "job": {"exists": True, "status": job},
        "children": children or {},
        "events": [],
        "eventSources": [],
    }


def test_a_child_on_one_side_only_is_one_difference() -> None:
    (d,) = diff("c", "p", snap({"Pod/a": {"spec": {"x": 1, "y": 2}}}), snap())
    assert (d.path, d.kubeflow, d.trainop) == ("children[Pod/a]", "present", ABSENT)


def test_conditions_are_compared_by_type_not_by_order() -> None:
    a = snap(conditions=[{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}])
    b = snap(conditions=[{"type": "Running", "status": "True"}, {"type": "Created", "status": "True"}])
    assert diff("c", "p", a, b) == []


def test_a_changed_env_value_is_named_by_container_and_variable() -> None:
    pod = {"spec": {"containers": [{"name": "pytorch", "env": [{"name": "RANK", "value": "0"}]}]}}
    other = {"spec": {"containers": [{"name": "pytorch", "env": [{"name": "RANK", "value": "1"}]}]}}
    (d,) = diff("c", "p", snap({"Pod/a": pod}), snap({"Pod/a": other}))
    assert d.path == "children[Pod/a].spec.containers[pytorch].env[RANK].value"


def test_a_missing_event_is_a_difference_of_its_own() -> None:
    a = {**snap(), "events": ["Normal PyTorchJobCreated: m", "Normal SuccessfulCreatePod: Created pod: a"]}
    b = {**snap(), "events": ["Normal PyTorchJobCreated: m"]}
    (d,) = diff("c", "p", a, b)
    assert (d.path, d.kubeflow, d.trainop) == (
        "events[Normal SuccessfulCreatePod: Created pod: a]",
        "present",
        ABSENT,
    )


# ---------------------------------------------------------------------------------------------- normalising
def raw_pod(name: str, uid: str, token: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "uid": uid, "resourceVersion": uid, "creationTimestamp": uid,
            "labels": {"app": "x", "metacontroller.k8s.io/x": uid},
            "ownerReferences": [{"kind": "PyTorchJob", "name": "j", "uid": uid, "controller": True}],
        },
        "spec": {"containers": [{"name": "c", "volumeMounts": [{"name": token, "mountPath": "/var/run"}]}],
                 "volumes": [{"name": token, "projected": {}}]},
        "status": {"phase": "Running", "podIP": uid},
    }  # fmt: skip


def test_incidental_pod_fields_are_not_compared() -> None:
    one = normalize.snapshot({"Pod": [raw_pod("p", "1", "kube-api-access-abcde")]}, "PyTorchJob", "j")
    two = normalize.snapshot({"Pod": [raw_pod("p", "2", "kube-api-access-zyxwv")]}, "PyTorchJob", "j")
    assert one == two
    assert one["children"]["Pod/p"]["metadata"]["labels"] == {"app": "x"}


def test_an_allocated_cluster_ip_is_not_compared_but_headless_is() -> None:
    def svc(ip: str) -> dict[str, Any]:
        return {"metadata": {"name": "s"}, "spec": {"clusterIP": ip, "clusterIPs": [ip]}}

    snaps = [
        normalize.snapshot({"Service": [svc(ip)]}, "TFJob", "j") for ip in ("10.96.0.7", "10.96.0.9", "None")
    ]
    assert snaps[0] == snaps[1] != snaps[2]


def test_job_times_are_compared_as_present_or_absent() -> None:
    created = {"type": "Created", "status": "True", "reason": "R", "message": "m"}
    job = {
        "status": {
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{**created, "lastTransitionTime": "t"}],
        }
    }
    status = normalize.snapshot({"job": job}, "TFJob", "j")["job"]["status"]
    assert status == {"startTime": "<set>", "conditions": [created]}


def test_only_events_on_the_job_count_and_repeats_are_one() -> None:
    def ev(kind: str, name: str) -> dict[str, Any]:
        return {"type": "Normal", "reason": "R", "message": "m", "count": 3,
                "involvedObject": {"kind": kind, "name": name}, "source": {"component": "op"}}  # fmt: skip

    events = [ev("TFJob", "j"), ev("TFJob", "j"), ev("Pod", "j-worker-0"), ev("TFJob", "other")]
    out = normalize.snapshot({"Event": events}, "TFJob", "j")
    assert (out["events"], out["eventSources"]) == (["Normal R: m"], ["op"])


# ------------------------------------------------------------------------------------------ Kubeflow's noise
def difference(path: str, kubeflow: Any, trainop: Any) -> Difference:
    return Difference("case", "finished", path, kubeflow, trainop)


def test_events_kubeflow_lost_to_its_spam_filter_are_noise_once_it_reached_the_burst() -> None:
    lost = difference(
        "events[Normal PyTorchJobSucceeded: PyTorchJob j is successfully completed.]", ABSENT, "present"
    )
    assert noise.explain(lost, {"_eventEmissions": 25}) == "kubeflow-event-spam-filter"
    assert noise.explain(lost, {"_eventEmissions": 24}) is None


def test_an_event_missing_on_our_side_is_never_noise() -> None:
    ours_missing = difference("events[Normal PyTorchJobSucceeded: m]", "present", ABSENT)
    assert noise.explain(ours_missing, {"_eventEmissions": 100}) is None


def test_a_selector_kubeflow_left_out_by_map_order_is_noise_but_one_we_leave_out_is_not() -> None:
    path = "job.status.replicaStatuses.Worker.selector"
    assert noise.explain(difference(path, ABSENT, "a=b"), {}) == "kubeflow-replica-selector-map-order"
    assert noise.explain(difference(path, "a=b", ABSENT), {}) is None


# ------------------------------------------------------------------------------------------ the cases
def test_an_example_is_rewritten_for_kwok_and_nothing_else_changes() -> None:
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "pytorch", "image": "docker.io/x/y:1", "args": ["--epochs", "1"]}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}},
                {"name": "shm", "emptyDir": {}},
            ],
        },
    }
    example: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "kubeflow"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}},
    }
    out = rewrite_for_kwok(example)
    pod = out["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert out["metadata"] == {"name": "j"}
    assert [c["image"] for c in pod["spec"]["initContainers"] + pod["spec"]["containers"]] == [IMAGE, IMAGE]
    assert pod["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}, {"name": "shm", "emptyDir": {}}]
    assert pod["metadata"] == template["metadata"]
    assert pod["spec"]["containers"][0]["args"] == ["--epochs", "1"]
    assert example["metadata"]["namespace"] == "kubeflow"  # the source document is left alone


def test_pods_are_finished_deciding_replica_last_and_index_zero_last() -> None:
    (case,) = [c for c in edge_cases() if c.id == "restart-never-tfjob-worker-fails"]
    assert case.finish_order() == [("PS", 0), ("Worker", 1), ("Worker", 0)]
    assert case.finish_order(("Worker-1",)) == [("Worker", 1)]


def test_case_ids_are_unique_and_namespaces_are_valid_names() -> None:
    cases = list(edge_cases())
    assert len({c.id for c in cases}) == len(cases)
    assert all(len(c.namespace) <= 63 and c.namespace == c.namespace.lower() for c in cases)


def test_an_operators_event_about_a_pod_is_compared_and_the_schedulers_is_not() -> None:
    def ev(component: str) -> dict[str, Any]:
        return {"type": "Normal", "reason": "R", "message": "m", "source": {"component": component},
                "involvedObject": {"kind": "Pod", "name": "j-worker-0"}}  # fmt: skip

    out = normalize.snapshot({"Event": [ev("tfjob-controller"), ev("default-scheduler")]}, "TFJob", "j")
    assert out["otherEvents"] == ["Pod/j-worker-0 Normal R: m (tfjob-controller)"]


def test_counts_name_each_child_and_event_at_a_checkpoint_once() -> None:
    (case, *_) = edge_cases()
    kubeflow = Run(case, "kubeflow", {"running": {"children": {"Pod/a": {}, "Pod/b": {}}, "events": ["x"]}})
    trainop = Run(case, "trainop", {"running": {"children": {"Pod/a": {}}, "events": ["x", "y"]}})
    result = Differential([Compared(case, kubeflow, trainop, compare(case, kubeflow, trainop))], [], 1.0)
    assert result.counts() == {"jobs": 1, "checkpoints": 1, "child snapshots": 2, "events": 2,
                               "differences": 2, "unlisted": 2}  # fmt: skip


def test_an_already_exists_warning_from_kubeflows_stale_cache_is_noise() -> None:
    warning = 'events[Warning FailedCreateService: Error creating: services "j-worker-0" already exists]'
    assert noise.explain(difference(warning, "present", ABSENT), {}) == "kubeflow-stale-cache-create"


def _tfjob_worker_failed(kubeflow_reason: str) -> tuple[Difference, dict[str, Any]]:
    path = "job.status.conditions[Failed].status"
    d = Difference("restart-always-tfjob-worker-fails", "worker-failed", path, "True", ABSENT)
    conditions = [{"type": "Failed", "status": "True", "reason": kubeflow_reason, "message": "m"}]
    return d, {"job": {"exists": True, "status": {"conditions": conditions}}}


def test_kubeflow_failing_a_restarting_tfjob_under_load_is_noise() -> None:
    assert noise.explain(*_tfjob_worker_failed("TFJobFailed")) == "kubeflow-tfjob-restart-counted-as-failure"


def test_kubeflows_tfjob_failed_event_without_its_condition_is_the_same_noise() -> None:
    event = "events[Normal TFJobFailed: TFJob ns/j has failed because 1 Worker replica(s) failed.]"
    d = Difference("restart-onfailure-tfjob-worker-fails", "worker-failed", event, "present", ABSENT)
    snapshot = {"job": {"exists": True, "status": {"conditions": []}}, "events": [event[7:-1]]}
    assert noise.explain(d, snapshot) == "kubeflow-tfjob-restart-counted-as-failure"


def test_a_tfjob_difference_is_not_noise_when_kubeflow_did_not_fail_it() -> None:
    d, _ = _tfjob_worker_failed("TFJobFailed")
    assert noise.explain(d, {"job": {"exists": True, "status": {"conditions": []}}}) is None
