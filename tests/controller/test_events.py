"""The Events a sync implies (trainop.controller.events): Kubeflow v1.9.4's reasons, messages and types,
once per
happening, with the same name for a retry and for a genuine repeat (which the recorder aggregates)."""

from __future__ import annotations

from tests.builders import container, job, replica, with_run_policy
from tests.controller.fakes import Cluster
from trainop.controller.events import deleted_job
from trainop.frameworks import framework
from trainop.job.event import Event

JOB = job("PyTorchJob", name="j", namespace="ns", Master=1, Worker=2)


def triples(events: tuple[Event, ...] | list[Event]) -> list[tuple[str, str, str]]:
    return [(e.type, e.reason, e.message) for e in events]


def running(spec: dict) -> Cluster:
    cluster = Cluster(spec)
    cluster.sync()
    cluster.sync()  # an MPI launcher waits for its ServiceAccount
    cluster.run()
    cluster.sync(5)
    return cluster


def test_a_new_job_records_each_pod_and_service_it_creates() -> None:
    events = Cluster(JOB).sync().events
    pods = [m for t, r, m in triples(events) if r == "SuccessfulCreatePod"]
    services = [m for t, r, m in triples(events) if r == "SuccessfulCreateService"]
    assert pods == ["Created pod: j-master-0", "Created pod: j-worker-0", "Created pod: j-worker-1"]
    assert services == [
        "Created service: j-master-0",
        "Created service: j-worker-0",
        "Created service: j-worker-1",
    ]
    assert {e.type for e in events} == {"Normal"}


def test_a_retried_sync_implies_the_same_occurrences() -> None:
    cluster = Cluster(JOB)
    first = cluster.sync(apply=False)
    again = cluster.sync(apply=False)
    assert first.events == again.events


def test_a_steady_running_job_implies_no_events() -> None:
    cluster = running(JOB)
    assert cluster.sync(30).events == ()


def test_a_created_job_records_no_created_event_as_kubeflow_has_none() -> None:
    reasons = {e.reason for e in Cluster(JOB).sync().events}
    assert not any(r.endswith("Created") for r in reasons)


def test_success_records_the_exit_code_and_the_condition_message() -> None:
    cluster = running(JOB)
    cluster.succeed("j-master-0")
    events = triples(cluster.sync(5).events)
    assert ("Normal", "ExitedWithCode", "Pod: ns.j-master-0 exited with code 0") in events
    assert ("Normal", "PyTorchJobSucceeded", "PyTorchJob j is successfully completed.") in events


def test_a_recreated_pod_is_restarting_deleted_and_created_again_under_the_same_names() -> None:
    cluster = running(with_spec_policy("OnFailure"))
    cluster.fail("j-worker-1", exit_code=137)
    seen = cluster.sync(5).events
    assert ("Normal", "ExitedWithCode", "Pod: ns.j-worker-1 exited with code 137") in triples(seen)
    assert (
        "Warning",
        "PyTorchJobRestarting",
        "job j is restarting because Worker replica(s) failed.",
    ) in triples(seen)
    deleted = cluster.sync(0).events
    assert ("Normal", "SuccessfulDeletePod", "Deleted pod: j-worker-1") in triples(deleted)
    recreated = [e for e in cluster.sync(1).events if e.reason == "SuccessfulCreatePod"]
    first = next(e for e in Cluster(JOB).sync().events if e.message == "Created pod: j-worker-1")
    assert [e.message for e in recreated] == ["Created pod: j-worker-1"]
    # the same name (aggregated into one object by the recorder), a new occurrence (count 2)
    assert recreated[0].name("j", "uid-j") == first.name("j", "uid-j")
    assert recreated[0].occurrence != first.occurrence


def with_spec_policy(policy: str) -> dict:
    return job(
        "PyTorchJob",
        name="j",
        namespace="ns",
        Master=1,
        Worker=replica("PyTorchJob", 2, restartPolicy=policy),
    )


def test_a_non_retryable_exit_code_is_a_warning_naming_the_replica_type() -> None:
    cluster = running(with_spec_policy("ExitCode"))
    cluster.fail("j-worker-0", exit_code=2)
    events = triples(cluster.sync(5).events)
    assert ("Warning", "PyTorchJobFailed", 'job "j" is failing because "Worker" replica(s) failed.') in events
    assert not [e for e in events if e[:2] == ("Normal", "PyTorchJobFailed")]


def test_a_backoff_failure_is_a_normal_failed_event() -> None:
    cluster = running(with_run_policy(with_spec_policy("OnFailure"), backoffLimit=0))
    cluster.restart_in_place("j-worker-0")
    events = triples(cluster.sync(5).events)
    message = "Job j has failed because it has reached the specified backoff limit"
    assert ("Normal", "PyTorchJobFailed", message) in events


def test_clean_up_at_completion_records_each_deletion() -> None:
    cluster = running(with_run_policy(JOB, cleanPodPolicy="All"))
    cluster.succeed("j-master-0")
    cluster.sync(5)
    events = triples(cluster.sync(0).events)
    assert sorted(m for _, r, m in events if r == "SuccessfulDeletePod") == [
        "Deleted pod: j-master-0",
        "Deleted pod: j-worker-0",
        "Deleted pod: j-worker-1",
    ]
    assert len([r for _, r, _ in events if r == "SuccessfulDeleteService"]) == 3
    assert cluster.sync(10).events == ()


def test_suspend_and_resume_are_recorded_once_each() -> None:
    cluster = running(JOB)
    cluster.edit(suspend=True)
    suspended = triples(cluster.sync(1).events)
    assert ("Normal", "PyTorchJobSuspended", "PyTorchJob j is suspended.") in suspended
    assert len([r for _, r, _ in suspended if r == "SuccessfulDeletePod"]) == 3
    assert cluster.sync(1).events == ()
    cluster.edit(suspend=False)
    resumed = triples(cluster.sync(1).events)
    assert ("Normal", "PyTorchJobResumed", "PyTorchJob j is resumed.") in resumed


def test_a_pod_waiting_with_a_message_is_a_warning_with_the_waiting_reason() -> None:
    cluster = Cluster(JOB)
    cluster.sync()
    pod = cluster.pod("j-worker-0")
    pod["status"] = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "pytorch",
                "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
            }
        ],
    }
    events = triples(cluster.sync(1).events)
    message = "Error pod j-worker-0 container pytorch waiting message: Back-off pulling image"
    assert events == [("Warning", "ImagePullBackOff", message)]


def test_template_restart_policy_is_warned_about_at_each_pod_creation() -> None:
    template = replica("PyTorchJob", 1, [container("pytorch")])
    template["template"]["spec"]["restartPolicy"] = "Always"
    events = Cluster(job("PyTorchJob", name="j", Master=template)).sync().events
    warnings = [e for e in events if e.reason == "SetPodTemplateRestartPolicy"]
    assert [e.message for e in warnings] == [
        "Restart policy in pod template will be overwritten by restart policy in replica spec"
    ]


def test_mpi_records_the_launcher_and_workers_as_kubeflows_mpi_controller_does() -> None:
    cluster = Cluster(job("MPIJob", name="j", namespace="ns", Launcher=1, Worker=2))
    cluster.sync()  # the ServiceAccount and j-config, which the pods wait for
    second = triples(cluster.sync().events)
    assert ("Normal", "SuccessfulCreatePod", "Created worker pod: j-worker-0") in second
    assert ("Normal", "MPIJobRunning", "launcher pod created success: j-launcher") in second
    assert ("Normal", "ServiceAccount is exist", "ServiceAccount: j-launcher") in second


def test_mpi_success_has_kubeflows_two_succeeded_events() -> None:
    cluster = running(job("MPIJob", name="j", namespace="ns", Launcher=1, Worker=2))
    cluster.succeed("j-launcher")
    events = triples(cluster.sync(5).events)
    assert ("Normal", "mpijobsSucceeded", "MPIJob ns/j successfully completed.") in events
    assert ("Normal", "MPIJobSucceeded", "MPIJob j is successfully completed.") in events


def test_mpi_launcher_failure_warns_then_records_the_failure() -> None:
    cluster = running(job("MPIJob", name="j", namespace="ns", Launcher=1, Worker=2))
    cluster.fail("j-launcher")
    events = triples(cluster.sync(5).events)
    assert ("Warning", "MPIJobFailed", "MPIJob ns/j has failed") in events
    assert ("Normal", "MPIJobFailed", "MPIJob j is failed because 1 Launcher replica(s) failed.") in events


def test_a_job_managed_elsewhere_implies_no_events() -> None:
    spec = with_run_policy(JOB, managedBy="kueue.x-k8s.io/multikueue")
    assert Cluster(spec).sync().events == ()


def test_event_names_follow_the_job_uid_reason_and_message() -> None:
    event = Event("Normal", "SuccessfulCreatePod", "Created pod: j-worker-0", "o1")
    assert event.name("j", "u1") == Event(
        "Normal", "SuccessfulCreatePod", "Created pod: j-worker-0", "o2"
    ).name("j", "u1")
    assert event.name("j", "u1") != event.name("j", "u2")
    assert event.name("j", "u1").startswith("j.")


def test_a_pytorch_restart_also_records_the_kind_level_warning_with_the_failed_count() -> None:
    cluster = running(with_spec_policy("OnFailure"))
    cluster.fail("j-worker-1", exit_code=137)
    events = triples(cluster.sync(5).events)
    message = "PyTorchJob j is restarting because 1 Worker replica(s) failed."
    assert ("Warning", "PyTorchJobRestarting", message) in events


def test_a_tfjob_restart_records_only_the_generic_restarting_warning() -> None:
    spec = job("TFJob", name="j", namespace="ns", Worker=replica("TFJob", 2, restartPolicy="OnFailure"))
    cluster = running(spec)
    cluster.fail("j-worker-1", exit_code=137)
    restarting = [e for e in triples(cluster.sync(5).events) if e[1] == "TFJobRestarting"]
    assert restarting == [
        ("Warning", "TFJobRestarting", "job j is restarting because Worker replica(s) failed.")
    ]


def test_a_permanent_exit_code_also_records_pytorchs_restarting_warning_as_kubeflow_does() -> None:
    cluster = running(with_spec_policy("ExitCode"))
    cluster.fail("j-worker-0", exit_code=1)
    events = triples(cluster.sync(5).events)
    message = "PyTorchJob j is restarting because 1 Worker replica(s) failed."
    assert ("Warning", "PyTorchJobRestarting", message) in events
    assert cluster.sync(5).events == ()


def test_a_never_policy_failure_records_no_restarting_warning() -> None:
    cluster = running(with_spec_policy("Never"))
    cluster.fail("j-worker-0", exit_code=1)
    assert not [e for e in cluster.sync(5).events if e.reason == "PyTorchJobRestarting"]


def test_the_ttl_deletion_event_has_each_kubeflow_controllers_reason() -> None:
    pytorch, tf = deleted_job(framework("PyTorchJob"), "j"), deleted_job(framework("TFJob"), "j")
    assert (pytorch.type, pytorch.reason, pytorch.message) == (
        "Normal",
        "SuccessfulDeletePod",
        "Deleted job: j",
    )
    assert (tf.type, tf.reason, tf.message) == ("Normal", "SuccessfulDeleteJob", "Deleted job: j")
