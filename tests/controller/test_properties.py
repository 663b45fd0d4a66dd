"""Properties Metacontroller depends on, over random jobs (docs/design.md#child-reconciliation,
docs/design.md#deterministic-status, docs/design.md#omitted-children-are-deleted).

(a) fixed point: once the world matches the desired state, syncing again - however much later - returns the
    same response byte for byte (otherwise Metacontroller writes the status on every sync and loops);
(b) a finished job's resync returns the same children and status, and its status never moves again;
(c) no running pod of an active job is ever missing from the desired children (a missing child is deleted).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.controller.fakes import Cluster, canonical, names
from tests.hooks.strategies import SETTINGS, jobs, kubelet
from trainop.api import constants as c
from trainop.frameworks import kind_info
from trainop.job.conditions import finished

PROPERTY = settings(
    max_examples=int(os.environ.get("TRAINOP_PROPERTY_EXAMPLES", "120")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
LATER = st.integers(1, 30 * 24 * 3600)


def is_finished(cluster: Cluster) -> bool:
    return finished(cluster.status.get("conditions") or [])


@PROPERTY
@given(job=jobs(suspend=None), gang=SETTINGS, data=st.data(), later=LATER)
def test_a_converged_job_is_a_fixed_point_whenever_it_is_synced(job, gang, data, later):
    cluster = Cluster(job, gang, v2_keys=data.draw(st.booleans(), label="v2 keys"))
    cluster.sync()
    kubelet(data, cluster)
    settled = cluster.converge()
    again = cluster.sync(later)
    assert canonical(again.response()) == canonical(settled.response())


@PROPERTY
@given(job=jobs(), gang=SETTINGS, data=st.data(), later=LATER)
def test_the_desired_children_fed_back_as_observed_change_nothing(job, gang, data, later):
    """The first answer for a state, applied by Metacontroller, is already the fixed point when
    nothing was dropped for a restart (a dropped pod comes back on the next sync, which is a change)."""
    cluster = Cluster(job, gang)
    cluster.sync()
    kubelet(data, cluster)
    observed = set(cluster.pod_names())
    first = cluster.sync(1)
    if first.resync_after_seconds is not None or observed != set(names(first.children, "Pod")):
        event("the answer created, deleted or dropped pods")
        return
    event("the answer kept exactly the observed pods")
    second = cluster.sync(later)
    assert canonical(second.response()) == canonical(first.response())


@PROPERTY
@given(job=jobs(suspend=None), gang=SETTINGS, data=st.data(), later=LATER)
def test_a_finished_jobs_resync_returns_the_same_children_and_status(job, gang, data, later):
    cluster = Cluster(job, gang)
    cluster.sync()
    cluster.set_podgroup_phase("Running")
    cluster.sync()
    kubelet(data, cluster)
    cluster.converge()
    if not is_finished(cluster):
        cluster.succeed()
        cluster.converge()
    event(f"finished: {is_finished(cluster)}")
    if not is_finished(cluster):
        return
    settled = cluster.history[-1]
    again = cluster.sync(later)
    assert canonical(again.response()) == canonical(settled.response())
    kubelet(data, cluster)  # whatever the pods do now, the job's status stays
    assert canonical(cluster.sync(later).status) == canonical(settled.status)


@PROPERTY
@given(job=jobs(), gang=SETTINGS, data=st.data(), shrink=st.integers(0, 3))
def test_no_running_pod_of_an_active_job_is_ever_omitted(job, gang, data, shrink):
    cluster = Cluster(job, gang)
    cluster.sync()
    cluster.set_podgroup_phase("Running")
    cluster.sync()
    kubelet(data, cluster)
    info = kind_info(job["kind"])
    specs = cluster.job["spec"][info.replica_field]
    rtype = data.draw(st.sampled_from(sorted(specs)), label="scaled type")
    specs[rtype]["replicas"] = max(
        0, specs[rtype]["replicas"] - shrink
    )  # scale-down (validity not required here)
    observed = {n: p for n, p in cluster.pods().items()}
    result = cluster.sync(1)
    event(f"finished: {is_finished(cluster)}")
    if is_finished(cluster):
        return
    replicas = {t.lower(): s["replicas"] for t, s in specs.items()}
    kept = set(names(result.children, "Pod"))
    for name, pod in observed.items():
        labels = pod["metadata"]["labels"]
        index = int(labels.get(c.LABEL_REPLICA_INDEX, "0"))
        if index >= replicas[labels[c.LABEL_REPLICA_TYPE]]:
            continue  # scaled down
        if pod["status"]["phase"] == "Failed":
            continue  # being restarted
        assert name in kept, f"{name} ({pod['status']['phase']}) was omitted"
