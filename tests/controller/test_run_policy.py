"""RunPolicy and validation the webhook would have done.

backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished, suspend/resume, managedBy, gang scheduling,
the elastic HPA: docs/design.md#backofflimit-and-activedeadlineseconds and the sections after it,
docs/design.md#gang-scheduling, docs/design.md#elastic-hpa.
"""

from __future__ import annotations

import copy

import pytest

from tests.builders import admission_review, container, job, replica, with_run_policy, with_spec
from tests.controller.fakes import Cluster, by_name, canonical, names, stamp
from trainop.admission.defaults import apply_defaults
from trainop.job.settings import Settings
from webhooks.admission import parse_review_document
from webhooks.admission import validate as webhook_validate

BACKOFF = "Job j has failed because it has reached the specified backoff limit"
DEADLINE = "Job j has failed because it was active longer than specified deadline"


def jax(replicas: int = 2, policy: str = "OnFailure", **run_policy) -> dict:
    out = job("JAXJob", name="j", Worker=replica("JAXJob", replicas, restartPolicy=policy))
    return with_run_policy(out, **run_policy) if run_policy else out


def started(job_spec: dict, settings: Settings | None = None) -> Cluster:
    cluster = Cluster(job_spec, settings)
    cluster.sync()
    cluster.run()
    cluster.sync(1)
    return cluster


def fail_and_recreate(cluster: Cluster, name: str) -> None:
    """Fail, record (first sync), delete (second), recreate (third), run again."""
    cluster.fail(name, exit_code=137)
    cluster.sync(1)
    if cluster.state() != "Failed":
        cluster.sync(1)
        cluster.sync(1)
        cluster.run(name)
        cluster.sync(1)


# ---- backoffLimit ------------------------------------------------------------------------------
class TestBackoffLimit:
    def test_container_restarts_in_place_count_against_it(self):
        cluster = started(jax(backoffLimit=3))
        cluster.restart_in_place("j-worker-0", 2)
        cluster.restart_in_place("j-worker-1", 1)
        cluster.sync(1)
        assert cluster.state() == "Running"  # three restarts: exactly what backoffLimit 3 allows
        cluster.restart_in_place("j-worker-1", 1)
        cluster.sync(1)
        assert (cluster.state(), cluster.condition("Failed")["message"]) == ("Failed", BACKOFF)
        assert cluster.condition("Failed")["reason"] == "JAXJobFailed"

    def test_recreations_count_against_it(self):
        cluster = started(jax(backoffLimit=2))
        fail_and_recreate(cluster, "j-worker-0")
        fail_and_recreate(cluster, "j-worker-1")
        assert cluster.state() == "Running"
        fail_and_recreate(cluster, "j-worker-1")
        assert (cluster.state(), cluster.condition("Failed")["message"]) == ("Failed", BACKOFF)

    def test_exit_code_recreations_are_capped_too(self):
        """Kubeflow never caps ExitCode recreations (kubeflow/common#167); we do."""
        cluster = started(jax(policy="ExitCode", backoffLimit=3))
        for _ in range(3):
            fail_and_recreate(cluster, "j-worker-0")
        assert cluster.state() == "Running"
        fail_and_recreate(cluster, "j-worker-0")
        assert cluster.state() == "Failed"
        assert cluster.status["podRestarts"]["j-worker-0"]["count"] == 4

    def test_one_allows_one_recreation_under_exit_code(self):
        cluster = started(jax(policy="ExitCode", backoffLimit=1))
        cluster.fail("j-worker-0", exit_code=137)
        cluster.sync(1)  # records the failure
        cluster.sync(1)  # deletes the pod
        cluster.sync(1)  # creates it again
        assert (cluster.deleted, cluster.created[-1]) == (["j-worker-0"], "j-worker-0")
        assert cluster.condition("Failed") is None

    def test_restarts_of_a_pod_that_is_then_recreated_are_not_forgotten(self):
        cluster = started(jax(backoffLimit=4))
        cluster.restart_in_place("j-worker-0", 2)
        cluster.sync(1)
        cluster.fail("j-worker-0", exit_code=137)  # keeps its restartCount of 2
        cluster.sync(1)
        assert cluster.status["podRestarts"]["j-worker-0"]["count"] == 3
        cluster.sync(1)
        cluster.sync(1)
        cluster.run("j-worker-0")
        cluster.restart_in_place("j-worker-1", 1)
        cluster.sync(1)
        assert cluster.state() == "Running"  # 2 in place + 1 recreation + 1 in place = 4
        cluster.restart_in_place("j-worker-1", 1)
        cluster.sync(1)
        assert cluster.state() == "Failed"

    def test_the_same_failed_pod_seen_again_counts_once(self):
        cluster = started(jax(backoffLimit=2))
        cluster.fail("j-worker-0", exit_code=137)
        for _ in range(4):
            cluster.sync(1, apply="status")
        assert cluster.status["podRestarts"]["j-worker-0"]["count"] == 1
        assert cluster.state() == "Restarting"

    def test_zero_fails_on_the_first_restart(self):
        cluster = started(jax(backoffLimit=0))
        cluster.restart_in_place("j-worker-1")
        cluster.sync(1)
        assert cluster.state() == "Failed"

    def test_never_pods_restart_counts_are_ignored(self):
        cluster = started(jax(policy="Never", backoffLimit=1))
        cluster.restart_in_place("j-worker-0", 5)  # e.g. a sidecar restarted: not the job's restart
        cluster.sync(1)
        assert cluster.state() == "Running"

    def test_failure_by_backoff_cleans_up_per_clean_pod_policy(self):
        cluster = started(jax(backoffLimit=1, cleanPodPolicy="Running"))
        cluster.restart_in_place("j-worker-1", 1)
        cluster.fail("j-worker-0", exit_code=137)
        cluster.sync(1)
        assert cluster.state() == "Failed"
        assert cluster.status["completionTime"] == cluster.timestamp()
        result = cluster.sync(1)
        assert names(result.children, "Pod") == ["j-worker-0"]


# ---- activeDeadlineSeconds ---------------------------------------------------------------------
class TestActiveDeadline:
    def test_resync_after_the_remaining_time(self):
        cluster = Cluster(jax(activeDeadlineSeconds=100))
        assert cluster.sync().resync_after_seconds == 100
        assert cluster.sync(30.25).resync_after_seconds == 69.75

    def test_expires_with_no_other_event(self):
        cluster = started(jax(activeDeadlineSeconds=100))  # started at t=0, running at t=1
        result = cluster.sync(98)
        assert cluster.state() == "Running"
        assert result.resync_after_seconds == 1
        result = cluster.sync(result.resync_after_seconds)
        assert (cluster.state(), cluster.condition("Failed")["message"]) == ("Failed", DEADLINE)
        assert result.resync_after_seconds is None

    def test_expired_job_is_cleaned_up_per_clean_pod_policy(self):
        cluster = started(jax(activeDeadlineSeconds=10, cleanPodPolicy="All"))
        cluster.sync(10)
        assert cluster.state() == "Failed"
        assert cluster.sync(1).children == []

    def test_counts_from_start_time_reset_on_resume(self):
        cluster = Cluster(jax(activeDeadlineSeconds=60))
        cluster.sync()
        cluster.edit(suspend=True)
        cluster.sync(50)
        cluster.edit(suspend=False)
        result = cluster.sync(50)
        assert cluster.status["startTime"] == stamp(100)
        assert result.resync_after_seconds == 60
        assert cluster.state() != "Failed"

    def test_finished_jobs_have_no_deadline(self):
        cluster = started(jax(activeDeadlineSeconds=60))
        cluster.succeed()
        cluster.sync(1)
        result = cluster.sync(3600)
        assert cluster.state() == "Succeeded"
        assert result.resync_after_seconds is None


# ---- ttlSecondsAfterFinished --------------------------------------------------------------------
class TestTTL:
    def finished(self, ttl: int) -> Cluster:
        cluster = started(jax(ttlSecondsAfterFinished=ttl))
        cluster.succeed()
        cluster.sync(1)
        return cluster

    def test_resyncs_for_the_remaining_time_after_completion(self):
        cluster = self.finished(60)
        assert cluster.history[-1].resync_after_seconds == 60
        assert cluster.sync(45).resync_after_seconds == 15
        assert not cluster.history[-1].delete_parent

    def test_asks_for_the_job_to_be_deleted_once_expired(self):
        cluster = self.finished(60)
        result = cluster.sync(60)
        assert result.delete_parent
        assert "resyncAfterSeconds" not in result.response()

    def test_zero_deletes_on_the_first_sync_after_completion(self):
        cluster = started(jax(ttlSecondsAfterFinished=0))
        cluster.fail("j-worker-0", exit_code=137)
        cluster.edit(backoffLimit=0)
        result = cluster.sync(1)
        assert cluster.state() == "Failed"
        assert result.delete_parent

    def test_is_not_applied_while_suspended(self):
        cluster = self.finished(10)
        cluster.edit(suspend=True)
        result = cluster.sync(3600)
        assert not result.delete_parent
        assert result.resync_after_seconds is None

    def test_running_jobs_are_never_deleted(self):
        cluster = started(jax(ttlSecondsAfterFinished=0))
        result = cluster.sync(3600)
        assert not result.delete_parent


# ---- suspend / resume --------------------------------------------------------------------------
class TestSuspend:
    def test_created_suspended_makes_no_pods_or_services(self):
        cluster = Cluster(jax(suspend=True))
        result = cluster.sync()
        assert result.children == []
        suspended = cluster.condition("Suspended")
        assert (suspended["status"], suspended["reason"], suspended["message"]) == (
            "True",
            "JAXJobSuspended",
            "JAXJob j is suspended.",
        )
        assert cluster.condition("Running") is None

    def test_created_suspended_has_no_replica_statuses(self):
        # Kubeflow only zeroes the replica statuses it already has.
        cluster = Cluster(with_run_policy(job("PyTorchJob", name="j", Worker=2), suspend=True))
        cluster.sync()
        assert "replicaStatuses" not in cluster.status

    def test_suspending_a_running_job_deletes_every_pod_and_service(self):
        cluster = started(jax())
        cluster.succeed("j-worker-1")
        cluster.sync(1)
        cluster.edit(suspend=True)
        result = cluster.sync(1)
        assert result.children == []
        assert cluster.pod_names() == [] == cluster.service_names()

    def test_suspending_sets_running_false_and_zeroes_active(self):
        cluster = started(jax())
        cluster.edit(suspend=True)
        cluster.sync(1)
        running = cluster.condition("Running")
        assert (running["status"], running["reason"]) == ("False", "JAXJobSuspended")
        assert "active" not in cluster.status["replicaStatuses"]["Worker"]
        assert cluster.state() == "Suspended"

    def test_suspended_job_is_a_fixed_point(self):
        cluster = started(jax())
        cluster.edit(suspend=True)
        first = cluster.sync(1)
        assert canonical(cluster.sync(600).response()) == canonical(first.response())

    def test_resume_recreates_pods_and_resets_start_time(self):
        cluster = started(jax())
        cluster.edit(suspend=True)
        cluster.sync(1)
        cluster.edit(suspend=False)
        result = cluster.sync(100)
        assert names(result.children, "Pod") == ["j-worker-0", "j-worker-1"]
        suspended = cluster.condition("Suspended")
        assert (suspended["status"], suspended["reason"], suspended["message"]) == (
            "False",
            "JAXJobResumed",
            "JAXJob j is resumed.",
        )
        assert cluster.status["startTime"] == cluster.timestamp()

    def test_resumed_job_runs_again(self):
        cluster = started(jax())
        cluster.edit(suspend=True)
        cluster.sync(1)
        cluster.edit(suspend=False)
        cluster.sync(1)
        cluster.run()
        cluster.sync(1)
        assert cluster.state() == "Running"

    def test_mpi_keeps_its_config_and_rbac_while_suspended(self):
        cluster = Cluster(with_run_policy(job("MPIJob", name="j", Launcher=1, Worker=1), suspend=True))
        result = cluster.sync()
        assert sorted(o["kind"] for o in result.children) == [
            "ConfigMap",
            "Role",
            "RoleBinding",
            "ServiceAccount",
        ]


# ---- managedBy ---------------------------------------------------------------------------------
class TestManagedBy:
    def test_multikueue_jobs_get_their_children_back_untouched_and_status_unchanged(self):
        cluster = started(jax())
        cluster.job["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
        cluster.fail("j-worker-0", exit_code=1)
        observed = cluster.children()
        status = {k: v for k, v in cluster.status.items() if k != "observedGeneration"}
        result = cluster.sync(60)
        assert result.status == status
        assert sorted(map(canonical, result.children)) == sorted(
            canonical(o) for group in observed.values() for o in group.values()
        )
        assert result.resync_after_seconds is None

    def test_multikueue_job_gets_nothing_created(self):
        result = Cluster(jax(managedBy="kueue.x-k8s.io/multikueue")).sync()
        assert result.children == []
        assert result.status == {}

    def test_our_own_manager_name_is_managed_normally(self):
        result = Cluster(jax(managedBy="kubeflow.org/training-operator")).sync()
        assert names(result.children, "Pod") == ["j-worker-0", "j-worker-1"]


# ---- gang scheduling ---------------------------------------------------------------------------
VOLCANO = Settings(gang_scheduler="volcano")
PLUGINS = Settings(gang_scheduler="scheduler-plugins-scheduler")
KUBERNETES = Settings(gang_scheduler="kubernetes")


def gang_job(**policy) -> dict:
    worker = replica(
        "PyTorchJob", 2, [container("pytorch", resources={"requests": {"cpu": "500m", "memory": "1Gi"}})]
    )
    out = job("PyTorchJob", name="j", Master=1, Worker=worker)
    out["metadata"]["annotations"] = {"team": "ml"}
    return with_run_policy(out, schedulingPolicy=policy)


class TestVolcano:
    def test_pod_group_is_a_child_named_after_the_job(self):
        result = Cluster(gang_job(queue="research", priorityClass="high"), VOLCANO).sync()
        assert by_name(result.children, "PodGroup")["j"] == {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "j", "namespace": "default", "annotations": {"team": "ml"}},
            "spec": {
                "minMember": 3,
                "minResources": {"cpu": "1", "memory": "2147483648"},
                "queue": "research",
                "priorityClassName": "high",
            },
        }

    def test_defaults_to_the_default_queue_and_min_available_wins(self):
        result = Cluster(gang_job(minAvailable=1, minResources={"cpu": "8"}), VOLCANO).sync()
        spec = by_name(result.children, "PodGroup")["j"]["spec"]
        assert spec == {"minMember": 1, "minResources": {"cpu": "8"}, "queue": "default"}

    def test_an_existing_groups_queue_wins(self):
        cluster = Cluster(gang_job(queue="research"), VOLCANO)
        cluster.sync()
        cluster.objects["PodGroup.scheduling.volcano.sh/v1beta1"]["j"]["spec"]["queue"] = "admitted-here"
        result = cluster.sync()
        assert by_name(result.children, "PodGroup")["j"]["spec"]["queue"] == "admitted-here"

    def test_pods_are_held_while_the_pod_group_is_pending(self):
        cluster = Cluster(gang_job(), VOLCANO)
        result = cluster.sync()
        assert names(result.children, "Pod") == []
        assert cluster.sync(5).children == result.children

    def test_services_wait_for_the_gang_too(self):
        cluster = Cluster(gang_job(), VOLCANO)
        assert names(cluster.sync().children, "Service") == []
        cluster.set_podgroup_phase("Inqueue")
        assert names(cluster.sync().children, "Service") == ["j-master-0", "j-worker-0", "j-worker-1"]

    def test_pods_come_once_the_pod_group_is_admitted(self):
        cluster = Cluster(gang_job(), VOLCANO)
        cluster.sync()
        cluster.set_podgroup_phase("Inqueue")
        result = cluster.sync()
        assert names(result.children, "Pod") == ["j-master-0", "j-worker-0", "j-worker-1"]

    def test_existing_pods_are_never_dropped_when_the_group_goes_back_to_pending(self):
        cluster = Cluster(gang_job(), VOLCANO)
        cluster.sync()
        cluster.set_podgroup_phase("Running")
        cluster.sync()
        cluster.run()
        cluster.set_podgroup_phase("Pending")
        assert names(cluster.sync().children, "Pod") == ["j-master-0", "j-worker-0", "j-worker-1"]

    def test_pods_get_the_volcano_scheduler_and_group_annotations(self):
        cluster = Cluster(gang_job(), VOLCANO)
        cluster.sync()
        cluster.set_podgroup_phase("Inqueue")
        pod = by_name(cluster.sync().children, "Pod")["j-worker-1"]
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"] == {
            "scheduling.k8s.io/group-name": "j",
            "volcano.sh/task-spec": "worker",
        }

    def test_a_scheduler_named_in_the_template_is_kept(self):
        job_spec = gang_job()
        job_spec["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["schedulerName"] = "mine"
        cluster = Cluster(job_spec, VOLCANO)
        cluster.sync()
        cluster.set_podgroup_phase("Running")
        assert by_name(cluster.sync().children, "Pod")["j-master-0"]["spec"]["schedulerName"] == "mine"

    @pytest.mark.parametrize("how", ["succeed", "suspend"])
    def test_pod_group_is_deleted_when_the_job_finishes_or_is_suspended(self, how):
        cluster = Cluster(gang_job(), VOLCANO)
        cluster.sync()
        cluster.set_podgroup_phase("Running")
        cluster.sync()
        if how == "succeed":
            cluster.succeed("j-master-0")
        else:
            cluster.edit(suspend=True)
        result = cluster.sync()
        assert names(result.children, "PodGroup") == []


class TestSchedulerPlugins:
    def test_pod_group_with_schedule_timeout(self):
        result = Cluster(gang_job(scheduleTimeoutSeconds=120), PLUGINS).sync()
        assert by_name(result.children, "PodGroup")["j"] == {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "j", "namespace": "default", "annotations": {"team": "ml"}},
            "spec": {
                "minMember": 3,
                "minResources": {"cpu": "1", "memory": "2147483648"},
                "scheduleTimeoutSeconds": 120,
            },
        }

    def test_pods_are_never_held_and_carry_the_group_label_and_scheduler(self):
        result = Cluster(gang_job(), PLUGINS).sync()
        pods = by_name(result.children, "Pod")
        assert sorted(pods) == ["j-master-0", "j-worker-0", "j-worker-1"]
        assert pods["j-worker-0"]["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pods["j-worker-0"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "j"
        assert "annotations" not in pods["j-worker-0"]["metadata"]


class TestKubeScheduler:
    def test_pod_group_is_kube_schedulers_own_with_a_gang_of_every_replica(self):
        result = Cluster(gang_job(), KUBERNETES).sync()
        assert by_name(result.children, "PodGroup")["j"] == {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        }

    def test_min_available_sets_the_gang_size(self):
        result = Cluster(gang_job(minAvailable=2), KUBERNETES).sync()
        spec = by_name(result.children, "PodGroup")["j"]["spec"]
        assert spec == {"schedulingPolicy": {"gang": {"minCount": 2}}}

    def test_pods_name_the_group_and_keep_their_scheduler(self):
        result = Cluster(gang_job(), KUBERNETES).sync()
        pods = by_name(result.children, "Pod")
        assert sorted(pods) == ["j-master-0", "j-worker-0", "j-worker-1"]
        for pod in pods.values():
            assert pod["spec"]["schedulingGroup"] == {"podGroupName": "j"}
            assert "schedulerName" not in pod["spec"]
            assert "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]
            assert "annotations" not in pod["metadata"]

    def test_pods_are_never_held(self):
        result = Cluster(gang_job(), KUBERNETES).sync()
        assert names(result.children, "Service") == ["j-master-0", "j-worker-0", "j-worker-1"]

    def test_the_setting_is_case_insensitive_like_volcano(self):
        result = Cluster(gang_job(), Settings(gang_scheduler="Kubernetes")).sync()
        assert by_name(result.children, "PodGroup")["j"]["apiVersion"] == "scheduling.k8s.io/v1alpha2"

    def test_pod_group_is_deleted_when_the_job_finishes(self):
        cluster = Cluster(gang_job(), KUBERNETES)
        cluster.sync()
        cluster.run()
        cluster.succeed("j-master-0")
        assert names(cluster.sync().children, "PodGroup") == []


# ---- elastic PyTorch HPA -----------------------------------------------------------------------
METRICS = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
]


def elastic(**run_policy) -> dict:
    out = with_spec(
        job("PyTorchJob", name="el", Worker=2),
        elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "metrics": METRICS},
    )
    return with_run_policy(out, **run_policy) if run_policy else out


class TestHPA:
    def test_elastic_job_with_metrics_gets_an_autoscaling_v2_hpa(self):
        result = Cluster(elastic()).sync()
        assert by_name(result.children, "HorizontalPodAutoscaler")["el"] == {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "el", "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "el"},
                "minReplicas": 1,
                "maxReplicas": 3,
                "metrics": METRICS,
            },
        }

    def test_no_metrics_no_hpa(self):
        job_spec = with_spec(
            job("PyTorchJob", name="el", Worker=2), elasticPolicy={"minReplicas": 1, "maxReplicas": 3}
        )
        assert names(Cluster(job_spec).sync().children, "HorizontalPodAutoscaler") == []

    def test_hpa_is_dropped_while_suspended_and_back_on_resume(self):
        cluster = Cluster(elastic())
        cluster.sync()
        cluster.edit(suspend=True)
        assert names(cluster.sync().children, "HorizontalPodAutoscaler") == []
        cluster.edit(suspend=False)
        assert names(cluster.sync().children, "HorizontalPodAutoscaler") == ["el"]


# ---- validation the webhook would have done ----------------------------------------------------
INVALID = [
    job("XGBoostJob", name="j", Worker=2),
    job("PyTorchJob", name="j", Master=2, Worker=1),
    job("TFJob", name="j", Chief=1, Master=1),
    job("MPIJob", name="j", Worker=2),
    job("JAXJob", name="j", Worker=replica("JAXJob", 1, [container("not-jax")])),
    job("MXJob", name="Bad_Name", Worker=1),
    with_run_policy(job("PaddleJob", name="j", Worker=1), cleanPodPolicy="Sometimes"),
    with_spec(job("PyTorchJob", name="j", Worker=1), nprocPerNode="²"),
]


@pytest.mark.parametrize("job_spec", INVALID, ids=lambda j: j["kind"])
class TestBypassedValidation:
    def test_fails_with_the_webhooks_exact_message_and_no_children(self, job_spec):
        cluster = Cluster(job_spec)
        result = cluster.sync()
        review = parse_review_document(admission_review(apply_defaults(job_spec)))
        message = webhook_validate(review)["response"]["status"]["message"]
        failed = cluster.condition("Failed")
        assert (failed["status"], failed["reason"], failed["message"]) == (
            "True",
            f"{job_spec['kind']}FailedValidation",
            message,
        )
        assert result.children == []

    def test_stays_failed_and_unchanged(self, job_spec):
        cluster = Cluster(job_spec)
        first = cluster.sync()
        again = cluster.sync(600)
        assert canonical(again.response()) == canonical(first.response())


def test_a_job_that_failed_validation_is_completed_and_its_ttl_deletes_it():
    invalid = with_run_policy(job("XGBoostJob", name="j", Worker=2), ttlSecondsAfterFinished=60)
    cluster = Cluster(invalid)
    first = cluster.sync()
    assert cluster.status["completionTime"] == cluster.timestamp()
    assert (first.resync_after_seconds, first.delete_parent) == (60, False)
    assert cluster.sync(60).delete_parent


def test_invalid_job_with_observed_pods_gets_them_deleted():
    cluster = started(jax())
    cluster.job["spec"]["jaxReplicaSpecs"]["Worker"]["restartPolicy"] = "Sometimes"
    result = cluster.sync()
    assert result.children == []
    assert cluster.state() == "Failed"


def test_validation_is_checked_before_defaulting_would_hide_a_problem():
    job_spec = copy.deepcopy(job("PyTorchJob", name="j", Worker=1))
    job_spec["spec"]["pytorchReplicaSpecs"]["worker"] = job_spec["spec"]["pytorchReplicaSpecs"]["Worker"]
    cluster = Cluster(job_spec)
    cluster.sync()
    assert cluster.condition("Failed")["reason"] == "PyTorchJobFailedValidation"
    assert "Duplicate value" in cluster.condition("Failed")["message"]
