"""Whole lifecycles per kind (docs/design.md#conditions and the sections after it): create -> Pending ->
Running -> a pod fails -> restart per policy -> success or failure -> cleanup, driven through the fake
cluster one sync at a time."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pytest

from tests.builders import job, replica, with_run_policy, with_spec
from tests.controller.fakes import LAST_APPLIED, STAMP0, Cluster, by_name, canonical, names, stamp
from trainop.jsontypes import Json


@dataclass(frozen=True)
class Case:
    """One kind's job with a replica type that gets recreated on failure."""

    spec: Json
    pods: list[str]
    victim: str  # fails with exit code 137 and is recreated
    leaders: list[str]  # their success completes the job
    running: str  # Running condition message
    succeeded: str  # Succeeded condition message
    services: bool = True
    counts: dict = field(default_factory=dict)  # replicaStatuses once everything runs (no selector)

    @property
    def kind(self) -> str:
        return self.spec["kind"]


def spec(kind: str, **types) -> Json:
    return job(kind, name="j", namespace="ns", **types)


CASES = [
    Case(
        spec("TFJob", PS=1, Worker=replica("TFJob", 2, restartPolicy="OnFailure")),
        ["j-ps-0", "j-worker-0", "j-worker-1"],
        victim="j-worker-1",
        leaders=["j-worker-0"],
        running="TFJob ns/j is running.",
        succeeded="TFJob ns/j successfully completed.",
        counts={"PS": {"active": 1}, "Worker": {"active": 2}},
    ),
    Case(
        spec("PyTorchJob", Master=1, Worker=2),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        victim="j-worker-1",
        leaders=["j-master-0"],
        running="PyTorchJob j is running.",
        succeeded="PyTorchJob j is successfully completed.",
        counts={"Master": {"active": 1}, "Worker": {"active": 2}},
    ),
    Case(
        spec("XGBoostJob", Master=1, Worker=replica("XGBoostJob", 2, restartPolicy="ExitCode")),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        victim="j-worker-0",
        leaders=["j-master-0"],
        running="XGBoostJob j is running.",
        succeeded="XGBoostJob j is successfully completed.",
        counts={"Master": {"active": 1}, "Worker": {"active": 2}},
    ),
    Case(
        spec("MPIJob", Launcher=1, Worker=replica("MPIJob", 2, restartPolicy="ExitCode")),
        ["j-launcher", "j-worker-0", "j-worker-1"],
        victim="j-worker-1",
        leaders=["j-launcher"],
        running="MPIJob j is running.",
        succeeded="MPIJob j is successfully completed.",
        services=False,
        counts={"Launcher": {"active": 1}, "Worker": {"active": 2}},
    ),
    Case(
        spec("PaddleJob", Master=1, Worker=replica("PaddleJob", 2, restartPolicy="Always")),
        ["j-master-0", "j-worker-0", "j-worker-1"],
        victim="j-worker-0",
        leaders=["j-master-0"],
        running="PaddleJob j is running.",
        succeeded="PaddleJob j is successfully completed.",
        counts={"Master": {"active": 1}, "Worker": {"active": 2}},
    ),
    Case(
        spec("JAXJob", Worker=replica("JAXJob", 2, restartPolicy="OnFailure")),
        ["j-worker-0", "j-worker-1"],
        victim="j-worker-1",
        leaders=["j-worker-0", "j-worker-1"],
        running="JAXJob ns/j is running.",
        succeeded="JAXJob ns/j successfully completed.",
        counts={"Worker": {"active": 2}},
    ),
    Case(
        spec("MXJob", Scheduler=1, Server=1, Worker=replica("MXJob", 2, restartPolicy="ExitCode")),
        ["j-scheduler-0", "j-server-0", "j-worker-0", "j-worker-1"],
        victim="j-worker-1",
        leaders=["j-scheduler-0"],
        running="MXJob j is running.",
        succeeded="MXJob j is successfully completed.",
        counts={"Scheduler": {"active": 1}, "Server": {"active": 1}, "Worker": {"active": 2}},
    ),
]
KINDS = [c.kind for c in CASES]
SELECTOR_KINDS = ("PyTorchJob", "PaddleJob", "JAXJob")


def created(case: Case) -> Cluster:
    cluster = Cluster(case.spec)
    cluster.sync()
    cluster.sync()  # triggered by the new children; an MPI launcher waits for its ServiceAccount
    cluster.sync()  # MPI: the launcher's Role names the workers the last one created
    return cluster


def running(case: Case) -> Cluster:
    cluster = created(case)
    cluster.run()
    cluster.sync(10)
    return cluster


def victim_failed(case: Case) -> tuple[Cluster, object]:
    """The victim fails; the first sync records it, the sync its status write triggers deletes it."""
    cluster = running(case)
    cluster.fail(case.victim, exit_code=137)
    cluster.sync(10)
    return cluster, cluster.sync(0)


def recovered(case: Case) -> Cluster:
    cluster, _ = victim_failed(case)
    cluster.sync(1)  # recreates the victim
    cluster.run(case.victim)
    cluster.sync(10)
    return cluster


def succeeded(case: Case) -> tuple[Cluster, object]:
    cluster = recovered(case)
    cluster.succeed(*case.leaders)
    return cluster, cluster.sync(10)


def conditions(cluster: Cluster) -> list[tuple[str, str, str]]:
    return [(x["type"], x["status"], x["reason"]) for x in cluster.status["conditions"]]


def counts(cluster: Cluster) -> dict:
    return {
        t: {k: v for k, v in s.items() if k != "selector"}
        for t, s in cluster.status["replicaStatuses"].items()
    }


@pytest.mark.parametrize("case", CASES, ids=KINDS)
class TestRecreateLifecycle:
    def test_create_makes_every_pod_and_service_and_only_the_created_condition(self, case):
        cluster = created(case)
        assert cluster.pod_names() == case.pods
        assert cluster.service_names() == (case.pods if case.services else [])
        assert conditions(cluster) == [("Created", "True", f"{case.kind}Created")]
        assert cluster.status["conditions"][0]["message"] == f"{case.kind} j is created."
        assert cluster.status["startTime"] == STAMP0
        assert "completionTime" not in cluster.status

    def test_pending_pods_are_counted_nowhere_and_change_nothing(self, case):
        cluster = created(case)
        first = cluster.history[-1]
        again = cluster.sync(30)
        assert canonical(again.response()) == canonical(first.response())
        assert counts(cluster) == {t: {} for t in case.counts}

    def test_running_leader_sets_running_and_counts_active(self, case):
        cluster = running(case)
        running_cond = cluster.condition("Running")
        assert (running_cond["status"], running_cond["reason"], running_cond["message"]) == (
            "True",
            f"{case.kind}Running",
            case.running,
        )
        assert running_cond["lastTransitionTime"] == stamp(10)
        assert counts(cluster) == case.counts

    def test_replica_statuses_carry_a_selector_only_for_scalable_kinds(self, case):
        cluster = running(case)
        for rtype, rs in cluster.status["replicaStatuses"].items():
            if case.kind in SELECTOR_KINDS:
                assert rs["selector"] == (
                    f"training.kubeflow.org/job-name=j,training.kubeflow.org/operator-name="
                    f"{case.kind.lower()}-controller,training.kubeflow.org/replica-type={rtype.lower()}"
                )
            else:
                assert "selector" not in rs

    def test_failed_pod_is_dropped_with_restarting_and_a_prompt_resync(self, case):
        cluster, result = victim_failed(case)
        assert case.victim not in names(result.children, "Pod")
        assert [n for n in case.pods if n != case.victim] == names(result.children, "Pod")
        restarting = cluster.condition("Restarting")
        rtype = case.victim.split("-")[1].capitalize()
        assert (restarting["status"], restarting["reason"], restarting["message"]) == (
            "True",
            f"{case.kind}Restarting",
            f"{case.kind} j is restarting because 1 {rtype} replica(s) failed.",
        )
        assert cluster.condition("Running") is None
        assert result.resync_after_seconds == 1
        assert counts(cluster)[rtype] == {"active": 1, "failed": 1}

    def test_the_failed_pods_service_stays(self, case):
        _, result = victim_failed(case)
        if case.services:
            assert case.victim in names(result.children, "Service")

    def test_failed_pod_is_recorded_once_against_backoff_with_its_uid(self, case):
        cluster = running(case)
        uid = cluster.pod(case.victim)["metadata"]["uid"]
        cluster.fail(case.victim, exit_code=137)
        cluster.sync(10, apply="status")  # deleting it failed: the same failed pod is observed again
        cluster.sync(1, apply="status")
        cluster.sync(1)
        assert cluster.status["podRestarts"] == {case.victim: {"count": 1, "uid": uid}}

    def test_dropped_pod_is_recreated_on_the_next_sync(self, case):
        cluster, _ = victim_failed(case)
        cluster.sync(1)
        assert cluster.pod_names() == case.pods
        assert cluster.pod(case.victim)["status"]["phase"] == "Pending"
        assert (
            cluster.pod(case.victim)["metadata"]["uid"] != cluster.status["podRestarts"][case.victim]["uid"]
        )

    def test_running_leaders_replace_restarting_with_running_as_soon_as_the_pod_is_back(self, case):
        cluster, _ = victim_failed(case)
        cluster.sync(1)
        assert [t for t, *_ in conditions(cluster)] == ["Created", "Running"]

    def test_recreated_pod_running_again_replaces_restarting_with_running(self, case):
        cluster = recovered(case)
        assert [t for t, *_ in conditions(cluster)] == ["Created", "Running"]
        assert cluster.status["podRestarts"][case.victim]["count"] == 1
        assert counts(cluster) == case.counts

    def test_leaders_success_completes_the_job(self, case):
        cluster, result = succeeded(case)
        assert conditions(cluster) == [
            ("Created", "True", f"{case.kind}Created"),
            ("Running", "False", f"{case.kind}Running"),
            ("Succeeded", "True", f"{case.kind}Succeeded"),
        ]
        assert cluster.condition("Succeeded")["message"] == case.succeeded
        assert cluster.status["completionTime"] == cluster.timestamp()
        assert result.resync_after_seconds is None

    def test_success_folds_still_active_replicas_into_succeeded(self, case):
        cluster, _ = succeeded(case)
        total = {t: sum(v.values()) for t, v in case.counts.items()}
        expected = {t: {"succeeded": n} for t, n in total.items()}
        if case.kind == "MPIJob":
            expected["Worker"] = {}  # Kubeflow stops counting workers once the launcher is done
        assert counts(cluster) == expected

    def test_success_with_default_clean_pod_policy_keeps_every_pod_and_service(self, case):
        _, result = succeeded(case)
        assert names(result.children, "Pod") == case.pods
        assert names(result.children, "Service") == (case.pods if case.services else [])

    def test_finished_job_keeps_its_state_whatever_the_pods_do(self, case):
        cluster, result = succeeded(case)
        frozen = canonical(result.status)
        cluster.fail(*case.pods, exit_code=1)
        later = cluster.sync(3600)
        assert canonical(later.status) == frozen
        assert cluster.state() == "Succeeded"


# ---- permanent failures ------------------------------------------------------------------------
FAILURES = [
    (
        spec("TFJob", PS=1, Worker=2),
        "j-worker-1",
        1,
        "TFJob ns/j has failed because 1 Worker replica(s) failed.",
    ),
    (spec("TFJob", Chief=1, PS=1), "j-ps-0", 1, "TFJob ns/j has failed because 1 PS replica(s) failed."),
    (
        spec("PyTorchJob", Master=1, Worker=replica("PyTorchJob", 2, restartPolicy="Never")),
        "j-worker-0",
        1,
        "PyTorchJob j is failed because 1 Worker replica(s) failed.",
    ),
    (
        spec("PyTorchJob", Master=1, Worker=replica("PyTorchJob", 2, restartPolicy="ExitCode")),
        "j-worker-0",
        1,
        'job "j" is failing because "Worker" replica(s) failed.',
    ),
    (
        spec("XGBoostJob", Master=1, Worker=replica("XGBoostJob", 1, restartPolicy="OnFailure")),
        "j-worker-0",
        137,
        "XGBoostJob j is failed because 1 Worker replica(s) failed.",
    ),
    (
        spec("XGBoostJob", Master=1, Worker=replica("XGBoostJob", 1, restartPolicy="ExitCode")),
        "j-worker-0",
        2,
        'job "j" is failing because "Worker" replica(s) failed.',
    ),
    (
        spec("MPIJob", Launcher=1, Worker=2),
        "j-worker-1",
        1,
        "MPIJob j is failed because 1 Worker replica(s) failed.",
    ),
    (
        spec("MPIJob", Launcher=1, Worker=2),
        "j-launcher",
        1,
        "MPIJob j is failed because 1 Launcher replica(s) failed.",
    ),
    (
        spec("PaddleJob", Worker=replica("PaddleJob", 2, restartPolicy="Never")),
        "j-worker-1",
        1,
        "PaddleJob j is failed because 1 Worker replica(s) failed.",
    ),
    (spec("JAXJob", Worker=2), "j-worker-0", 1, "JAXJob j is failed because 1 Worker replica(s) failed."),
    (
        spec("MXJob", Scheduler=1, Server=1, Worker=1),
        "j-server-0",
        1,
        "MXJob j is failed because 1 Server replica(s) failed.",
    ),
    (
        spec("MXJob", Scheduler=1, Worker=replica("MXJob", 1, restartPolicy="ExitCode")),
        "j-worker-0",
        127,
        'job "j" is failing because "Worker" replica(s) failed.',
    ),
]


@pytest.mark.parametrize(
    ("job_spec", "victim", "code", "message"),
    FAILURES,
    ids=[f"{f[0]['kind']}-{f[1]}-{f[2]}" for f in FAILURES],
)
class TestPermanentFailure:
    def drive(self, job_spec, victim, code):
        cluster = Cluster(job_spec)
        cluster.sync()
        cluster.sync()  # an MPI launcher waits for its ServiceAccount
        cluster.run()
        cluster.sync(5)
        cluster.fail(victim, exit_code=code)
        return cluster, cluster.sync(5)

    def test_fails_the_job_with_the_kinds_reason_and_message(self, job_spec, victim, code, message):
        cluster, _ = self.drive(job_spec, victim, code)
        failed = cluster.condition("Failed")
        kind = job_spec["kind"]
        # Kubeflow's MPI controller nests its reason prefix: MPIJobMPIJobFailed.
        doubled = kind == "MPIJob" and not message.startswith("job ")
        reason = "MPIJobMPIJobFailed" if doubled else f"{kind}Failed"
        assert (failed["status"], failed["reason"], failed["message"]) == ("True", reason, message)
        assert cluster.condition("Running")["status"] == "False"
        assert cluster.status["completionTime"] == cluster.timestamp()

    def test_failed_pod_is_kept_for_inspection_under_the_default_policy(
        self, job_spec, victim, code, message
    ):
        _, result = self.drive(job_spec, victim, code)
        assert victim in names(result.children, "Pod")

    def test_failed_job_stays_failed_when_the_leaders_later_succeed(self, job_spec, victim, code, message):
        cluster, result = self.drive(job_spec, victim, code)
        cluster.succeed()
        later = cluster.sync(60)
        assert later.status == result.status
        assert cluster.state() == "Failed"


# ---- restart policies --------------------------------------------------------------------------
def jax(policy: str, replicas: int = 2) -> Json:
    return spec("JAXJob", Worker=replica("JAXJob", replicas, restartPolicy=policy))


def test_a_failed_pod_is_kept_until_its_restart_record_comes_back():
    cluster = Cluster(jax("OnFailure"))
    cluster.sync()
    cluster.fail("j-worker-1", exit_code=1)
    first = cluster.sync()
    assert "j-worker-1" in names(first.children, "Pod")
    assert cluster.status["podRestarts"]["j-worker-1"]["uid"] == cluster.pod("j-worker-1")["metadata"]["uid"]
    assert first.resync_after_seconds == 1
    second = cluster.sync()
    assert "j-worker-1" not in names(second.children, "Pod")


@pytest.mark.parametrize("code", [130, 137, 143, 255])
def test_exit_code_policy_recreates_pods_killed_by_a_signal(code):
    cluster = Cluster(jax("ExitCode"))
    cluster.sync()
    cluster.run()
    cluster.sync()
    cluster.fail("j-worker-0", exit_code=code)
    cluster.sync()  # records the failure in status.podRestarts
    result = cluster.sync()  # the status write's sync deletes the pod
    assert "j-worker-0" not in names(result.children, "Pod")
    assert cluster.state() == "Restarting"


@pytest.mark.parametrize("code", [1, 2, 127])
def test_exit_code_policy_fails_the_job_on_an_application_error(code):
    cluster = Cluster(jax("ExitCode"))
    cluster.sync()
    cluster.fail("j-worker-0", exit_code=code)
    result = cluster.sync()
    assert cluster.state() == "Failed"
    assert "j-worker-0" in names(result.children, "Pod")


def test_exit_code_policy_retries_a_failed_pod_without_a_termination_record():
    cluster = Cluster(jax("ExitCode"))
    cluster.sync()
    cluster.pod("j-worker-1")["status"] = {"phase": "Failed", "reason": "Evicted"}
    cluster.sync()  # records the failure in status.podRestarts
    result = cluster.sync()  # the status write's sync deletes the pod
    assert "j-worker-1" not in names(result.children, "Pod")
    assert cluster.state() == "Restarting"


def test_exit_code_looks_at_the_default_container_not_sidecars():
    worker = replica("JAXJob", 1, restartPolicy="ExitCode")
    worker["template"]["spec"]["containers"].append({"name": "sidecar", "image": "x"})
    cluster = Cluster(spec("JAXJob", Worker=worker))
    cluster.sync()
    pod = cluster.pod("j-worker-0")
    pod["status"] = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "sidecar", "restartCount": 0, "state": {"terminated": {"exitCode": 1}}},
            {"name": "jax", "restartCount": 0, "state": {"terminated": {"exitCode": 137}}},
        ],
    }
    cluster.sync()
    assert cluster.state() == "Restarting"


@pytest.mark.parametrize("policy", ["OnFailure", "Always"])
@pytest.mark.parametrize("code", [1, 137])
def test_on_failure_and_always_recreate_whatever_the_exit_code(policy, code):
    cluster = Cluster(jax(policy))
    cluster.sync()
    cluster.fail("j-worker-1", exit_code=code)
    cluster.sync()  # records the failure in status.podRestarts
    result = cluster.sync()  # the status write's sync deletes the pod
    assert "j-worker-1" not in names(result.children, "Pod")
    assert cluster.state() == "Restarting"


def test_never_policy_fails_on_any_failed_pod_even_a_signal():
    cluster = Cluster(jax("Never"))
    cluster.sync()
    cluster.fail("j-worker-1", exit_code=137)
    cluster.sync()
    assert cluster.state() == "Failed"


def test_two_failed_types_restart_together_and_name_the_first():
    job_spec = spec("PyTorchJob", Master=replica("PyTorchJob", 1), Worker=replica("PyTorchJob", 2))
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.fail("j-master-0", "j-worker-0", "j-worker-1", exit_code=137)
    cluster.sync()  # records the failure in status.podRestarts
    result = cluster.sync()  # the status write's sync deletes the pod
    assert names(result.children, "Pod") == []
    assert (
        cluster.condition("Restarting")["message"]
        == "PyTorchJob j is restarting because 1 Master replica(s) failed."
    )
    assert sorted(cluster.status["podRestarts"]) == ["j-master-0", "j-worker-0", "j-worker-1"]


def test_pod_already_being_deleted_is_not_recounted_nor_dropped_twice():
    cluster = Cluster(jax("OnFailure"), instant_delete=False)
    cluster.sync()
    cluster.fail("j-worker-0", exit_code=137)
    cluster.sync()
    cluster.sync()
    assert cluster.pod("j-worker-0")["metadata"]["deletionTimestamp"]
    result = cluster.sync(1)
    assert cluster.status["podRestarts"]["j-worker-0"]["count"] == 1
    assert result.resync_after_seconds is None
    cluster.finish_deletions()
    cluster.sync(1)
    assert cluster.pod("j-worker-0")["status"]["phase"] == "Pending"


# ---- per-kind success and running rules --------------------------------------------------------
def run_then(job_spec: Json, *succeed: str, run: tuple[str, ...] | None = None) -> Cluster:
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.sync()  # triggered by the new children; an MPI launcher waits for its ServiceAccount
    cluster.run(*(run or ()))
    cluster.succeed(*succeed) if succeed else None
    cluster.sync(5)
    return cluster


def test_tf_with_chief_succeeds_when_the_chief_does_even_with_an_evaluator_running():
    cluster = run_then(spec("TFJob", Chief=1, Evaluator=1, Worker=2), "j-chief-0")
    assert cluster.state() == "Succeeded"


def test_tf_with_chief_ignores_worker_0s_success():
    cluster = run_then(spec("TFJob", Chief=1, Worker=2), "j-worker-0")
    assert cluster.state() == "Running"


def test_tf_without_chief_succeeds_when_worker_0_exits_zero():
    cluster = run_then(spec("TFJob", PS=1, Worker=3), "j-worker-0")
    assert cluster.state() == "Succeeded"


def test_tf_all_workers_success_policy_waits_for_every_worker():
    job_spec = with_spec(spec("TFJob", PS=1, Worker=2), successPolicy="AllWorkers")
    cluster = run_then(job_spec, "j-worker-0")
    assert cluster.state() == "Running"
    cluster.succeed("j-worker-1")
    cluster.sync(5)
    assert cluster.state() == "Succeeded"


def test_tf_dynamic_workers_may_fail_without_failing_the_job():
    job_spec = with_spec(spec("TFJob", Chief=1, Worker=2), enableDynamicWorker=True)
    cluster = run_then(job_spec)
    cluster.fail("j-worker-1", exit_code=1)
    cluster.sync(5)
    assert cluster.state() == "Running"
    cluster.succeed("j-chief-0")
    cluster.sync(5)
    assert cluster.state() == "Succeeded"


def test_pytorch_running_needs_the_master_not_just_workers():
    cluster = run_then(spec("PyTorchJob", Master=1, Worker=2), run=("j-worker-0", "j-worker-1"))
    assert cluster.condition("Running") is None


def test_pytorch_worker_only_job_needs_every_worker_to_succeed():
    cluster = run_then(spec("PyTorchJob", Worker=2), "j-worker-1")
    assert cluster.state() == "Running"


def test_elastic_pytorch_succeeds_when_any_worker_does():
    job_spec = with_spec(spec("PyTorchJob", Worker=3), elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    cluster = run_then(job_spec, "j-worker-2")
    assert cluster.state() == "Succeeded"


def test_paddle_collective_job_needs_every_worker_to_succeed():
    job_spec = with_spec(spec("PaddleJob", Worker=2), elasticPolicy={"minReplicas": 1, "maxReplicas": 2})
    cluster = run_then(job_spec, "j-worker-0")
    assert cluster.state() == "Running"


def test_jax_needs_every_worker_to_succeed():
    cluster = run_then(spec("JAXJob", Worker=3), "j-worker-0", "j-worker-1")
    assert cluster.state() == "Running"


def test_mpi_runs_when_the_launcher_runs_and_succeeds_with_it():
    cluster = run_then(spec("MPIJob", Launcher=1, Worker=2), run=("j-launcher",))
    assert cluster.state() == "Running"
    cluster.succeed("j-launcher")
    cluster.sync(5)
    assert cluster.state() == "Succeeded"


def test_mxnet_single_worker_job_succeeds_with_its_worker():
    cluster = run_then(spec("MXJob", Worker=1), "j-worker-0")
    assert cluster.state() == "Succeeded"


def test_succeeded_pods_of_other_types_do_not_complete_a_job():
    cluster = run_then(spec("XGBoostJob", Master=1, Worker=2), "j-worker-0", "j-worker-1")
    assert cluster.state() == "Running"
    assert cluster.status["replicaStatuses"]["Worker"] == {"succeeded": 2}


def test_running_pod_being_deleted_counts_as_failed():
    cluster = run_then(spec("JAXJob", Worker=2))
    cluster.pod("j-worker-1")["metadata"]["deletionTimestamp"] = "2024-05-01T12:01:00Z"
    cluster.sync()
    assert cluster.status["replicaStatuses"]["Worker"]["active"] == 1
    assert cluster.status["replicaStatuses"]["Worker"]["failed"] == 1


# ---- cleanPodPolicy ----------------------------------------------------------------------------
def finished_with_mixed_pods(policy: str | None, fail: bool = False) -> tuple[Cluster, object]:
    """Master done; worker-0 Running, worker-1 Pending, worker-2 Succeeded."""
    job_spec = spec(
        "PyTorchJob",
        Master=replica("PyTorchJob", 1, restartPolicy="Never"),
        Worker=replica("PyTorchJob", 3, restartPolicy="Never"),
    )
    if policy:
        job_spec = with_run_policy(job_spec, cleanPodPolicy=policy)
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.run("j-master-0", "j-worker-0")
    cluster.succeed("j-worker-2")
    cluster.sync(5)
    if fail:
        cluster.fail("j-master-0")
    else:
        cluster.succeed("j-master-0")
    cluster.sync(5)  # finishes the job; cleanup waits for the finished status to come back
    return cluster, cluster.sync(1)


@pytest.mark.parametrize("fail", [False, True], ids=["succeeded", "failed"])
@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        (None, ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"]),
        ("None", ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"]),
        ("Running", ["j-master-0", "j-worker-2"]),
        ("All", []),
    ],
)
def test_clean_pod_policy_decides_which_pods_and_services_stay(policy, kept, fail):
    cluster, result = finished_with_mixed_pods(policy, fail)
    assert cluster.state() == ("Failed" if fail else "Succeeded")
    assert names(result.children, "Pod") == kept
    assert names(result.children, "Service") == kept
    cluster.sync(5)
    assert cluster.pod_names() == kept == cluster.service_names()


@pytest.mark.parametrize("policy", ["Running", "All"])
def test_the_sync_that_finishes_a_job_keeps_every_pod_and_comes_back_to_clean_up(policy):
    cluster, _ = finished_with_mixed_pods(policy)
    finishing = cluster.history[-2]
    assert names(finishing.children, "Pod") == ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2"]
    assert finishing.resync_after_seconds == 1
    assert cluster.history[-1].resync_after_seconds is None


def test_a_stale_pre_finish_status_never_brings_cleaned_pods_back():
    """The parent in a request can lag behind the last status write (docs/design.md#lagging-parent-cache).
    Cleanup only happens once the finished status came back, so a lagging copy can never meet a cleaned-up
    job."""
    job_spec = with_run_policy(
        spec("JAXJob", Worker=replica("JAXJob", 2, restartPolicy="Never")), cleanPodPolicy="All"
    )
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.run()
    cluster.sync(1)
    stale = copy.deepcopy(cluster.job["status"])
    cluster.succeed()
    finishing = cluster.sync(1)
    assert names(finishing.children, "Pod") == ["j-worker-0", "j-worker-1"]
    cluster.job["status"] = copy.deepcopy(stale)  # the cache still holds the running job
    again = cluster.sync(1)
    assert names(again.children, "Pod") == ["j-worker-0", "j-worker-1"]
    assert cluster.state() == "Succeeded"


def test_kept_pods_are_returned_as_observed_without_server_fields():
    _, result = finished_with_mixed_pods("None")
    pod = by_name(result.children, "Pod")["j-worker-2"]
    assert "status" not in pod
    assert not {"uid", "resourceVersion", "creationTimestamp", "ownerReferences", "managedFields"} & set(
        pod["metadata"]
    )
    assert LAST_APPLIED not in (pod["metadata"].get("annotations") or {})
    assert pod["spec"]["restartPolicy"] == "Never"


def test_mpi_config_and_rbac_survive_clean_pod_policy_all():
    job_spec = with_run_policy(spec("MPIJob", Launcher=1, Worker=2), cleanPodPolicy="All")
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.sync()  # the launcher waits for its ServiceAccount
    cluster.succeed("j-launcher")
    cluster.sync(5)
    result = cluster.sync(1)
    assert names(result.children, "Pod") == []
    assert sorted((o["kind"], o["metadata"]["name"]) for o in result.children) == [
        ("ConfigMap", "j-config"),
        ("Role", "j-launcher"),
        ("RoleBinding", "j-launcher"),
        ("ServiceAccount", "j-launcher"),
    ]


def test_mpi_legacy_top_level_clean_pod_policy_is_honoured():
    job_spec = with_spec(spec("MPIJob", Launcher=1, Worker=1), cleanPodPolicy="Running")
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.sync()  # the launcher waits for its ServiceAccount
    cluster.run()
    cluster.succeed("j-launcher")
    cluster.sync(5)
    result = cluster.sync(1)
    assert names(result.children, "Pod") == ["j-launcher"]


def test_tf_ps_keeps_running_after_success_unless_cleaned():
    cluster = run_then(spec("TFJob", PS=1, Worker=2), "j-worker-0")
    assert "j-ps-0" in cluster.pod_names()
    cluster2 = run_then(
        with_run_policy(spec("TFJob", PS=1, Worker=2), cleanPodPolicy="Running"), "j-worker-0"
    )
    cluster2.sync()
    assert cluster2.pod_names() == ["j-worker-0"]


# ---- scaling, ownership, request shapes -------------------------------------------------------
def test_scaling_down_drops_pods_and_services_above_the_new_count():
    job_spec = with_spec(spec("PyTorchJob", Worker=3), elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    cluster = run_then(job_spec)
    cluster.scale("Worker", 2)
    result = cluster.sync()
    assert names(result.children, "Pod") == ["j-worker-0", "j-worker-1"]
    assert names(result.children, "Service") == ["j-worker-0", "j-worker-1"]


def test_scaling_up_adds_pods_with_updated_env():
    job_spec = with_spec(spec("PyTorchJob", Worker=2), elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    cluster = run_then(job_spec)
    cluster.scale("Worker", 3)
    result = cluster.sync()
    assert names(result.children, "Pod") == ["j-worker-0", "j-worker-1", "j-worker-2"]
    assert cluster.pod("j-worker-2")["status"]["phase"] == "Pending"


def test_pods_controlled_by_someone_else_are_ignored():
    cluster = Cluster(spec("JAXJob", Worker=1))
    cluster.sync()
    stranger = copy.deepcopy(cluster.pod("j-worker-0"))
    stranger["metadata"].update(name="j-worker-7", uid="other")
    stranger["metadata"]["ownerReferences"][0]["uid"] = "another-job"
    stranger["status"] = {"phase": "Running"}
    cluster.pods()["j-worker-7"] = stranger
    result = cluster.sync()
    assert cluster.status["replicaStatuses"]["Worker"] == {
        "selector": cluster.status["replicaStatuses"]["Worker"]["selector"]
    }
    assert "j-worker-7" not in names(result.children, "Pod")


@pytest.mark.parametrize("case", CASES, ids=KINDS)
def test_v2_namespace_slash_name_keys_give_the_same_answers(case):
    v1, v2 = Cluster(case.spec), Cluster(case.spec, v2_keys=True)
    for cluster in (v1, v2):
        cluster.sync()
        cluster.run()
        cluster.sync(5)
        cluster.fail(case.victim, exit_code=137)
        cluster.sync(5)
    assert canonical(v1.history[-1].response()) == canonical(v2.history[-1].response())
    assert "ns/" + case.victim in v2.request()["children"]["Pod.v1"] or case.victim not in v2.pods()


def test_start_time_is_kept_and_condition_times_move_only_on_change():
    cluster = run_then(spec("JAXJob", Worker=1))
    before = copy.deepcopy(cluster.status)
    cluster.sync(100)
    assert cluster.status["startTime"] == STAMP0
    assert cluster.status["conditions"] == before["conditions"]
