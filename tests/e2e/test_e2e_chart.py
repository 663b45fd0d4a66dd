"""The Helm chart installed with its Metacontroller dependency on a real apiserver, as the README says.

A control plane of its own (the chart installs CRDs, webhook configurations and CompositeControllers that
would clash with the session stack's). The release's servers run outside the cluster on loopback from the
project's image, reached through the chart's development URLs, each with its ServiceAccount's token; the
real Metacontroller runs with the chart's ServiceAccount and arguments. See tests/e2e/chart.py.

The phases build on each other (module-scoped fixtures): default install -> a job of every kind ->
upgrade with non-default values -> uninstall (jobs first) -> a second install with non-default values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart import Release, packaged_chart
from controlplane import ControlPlane, default_bin_dir
from trainop_stack import KINDS, Namespace, example_job, job, kwok_annotations, replica

pytestmark = pytest.mark.e2e

RELEASE, NAMESPACE = "trainop", "trainop-system"
# The denial the validating webhook gives a job without its required Master (tests/e2e PROBE_MESSAGE).
PROBE = job("XGBoostJob", "chart-probe", {"Worker": replica("XGBoostJob")})
PROBE_MESSAGE = "must contain exactly one Master"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(default_bin_dir(), tmp_path_factory.mktemp("chart-cp"))
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaged_chart(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module")
def release(cluster: ControlPlane, chart_dir: Path) -> Iterator[Release]:
    """The default install, its servers running; stopped (not uninstalled) at the end of the module."""
    rel = Release(cluster, chart_dir, RELEASE, NAMESPACE)
    rel.install()
    rel.start_servers()
    try:
        yield rel
    finally:
        rel.stop_servers()


def _namespace(rel: Release, name: str) -> Namespace:
    rel.cp.create_namespace(name)
    return Namespace(rel, name)


def _dry_run(rel: Release, obj: dict[str, Any]) -> Any:
    return rel.cp.kubectl(
        "create", "--dry-run=server", "-n", "default", "-f", "-", input=json.dumps(obj), check=False
    )


def test_default_install_creates_every_object_of_the_release(release: Release) -> None:
    objects = release.manifest_objects()
    kinds = {o.kind for o in objects}
    assert {
        "Deployment", "StatefulSet", "CompositeController", "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration", "ClusterRole", "ServiceAccount", "Service",
    } <= kinds  # fmt: skip
    missing = [o for o in objects if release.cp.kubectl("get", *o.ref(), check=False).returncode != 0]
    assert missing == []
    assert len([o for o in objects if o.kind == "CompositeController"]) == len(KINDS)


def test_default_install_needs_no_cert_manager_and_no_hand_made_secret(release: Release) -> None:
    values = release.values()
    assert values["certManager"]["enabled"] is False
    assert not values["webhooks"]["caBundle"]
    res = _dry_run(release, PROBE)
    assert res.returncode != 0 and PROBE_MESSAGE in res.stderr, res.stderr
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        op = "mutate" if kind.startswith("mutating") else "validate"
        config = release.cp.get_json(f"{kind}/{RELEASE}-{op}")
        assert all(h["clientConfig"].get("caBundle") for h in config["webhooks"]), config


@pytest.fixture(scope="module")
def every_kind(release: Release) -> Iterator[tuple[Namespace, dict[str, dict[str, Any]]]]:
    ns = _namespace(release, "chart-jobs")
    applied = {kind: example_job(kind, kwok_annotations("Succeeded", "1s")) for kind in KINDS}
    for obj in applied.values():
        ns.apply(obj)
    yield ns, applied


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_job_of_every_kind_succeeds_through_the_release(
    every_kind: tuple[Namespace, dict[str, dict[str, Any]]], kind: str
) -> None:
    ns, applied = every_kind
    ref = f"{KINDS[kind]['plural']}.kubeflow.org/{applied[kind]['metadata']['name']}"
    ns.wait_for(ref, "Succeeded", timeout=120)
    stored = ns.get(ref)
    assert stored["spec"]["runPolicy"]["cleanPodPolicy"], "defaulted by the release's mutating webhook"


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_hooks_record_events_on_every_job_through_the_admission_policy(
    every_kind: tuple[Namespace, dict[str, dict[str, Any]]], kind: str
) -> None:
    """The hooks' ServiceAccount writes Events only as the admission policy allows: so these got in."""
    ns, applied = every_kind
    name = applied[kind]["metadata"]["name"]

    def recorded() -> bool:
        events = ns.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}", "-o", "json")
        sources = {e.get("source", {}).get("component") for e in json.loads(events.stdout)["items"]}
        return f"{kind.lower()}-controller" in sources

    ns.wait_until(f"an Event on {kind} {name} from its controller", recorded, timeout=60)


def test_an_mpijob_gets_its_launcher_role_and_binding_past_the_metacontroller_policies(
    release: Release, every_kind: tuple[Namespace, dict[str, dict[str, Any]]]
) -> None:
    """The release holds Metacontroller's Role writes to launchers' (docs/security.md): these got in."""
    ns, applied = every_kind
    name = applied["MPIJob"]["metadata"]["name"]
    ns.wait_for(f"mpijobs.kubeflow.org/{name}", "Succeeded", timeout=120)
    assert release.kubectl("get", "validatingadmissionpolicy", f"{RELEASE}-metacontroller-launcher-roles")
    workers = [
        f"{name}-worker-{i}"
        for i in range(applied["MPIJob"]["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])
    ]

    def exec_rule_names_the_workers() -> bool:
        rules = ns.get(f"role/{name}-launcher")["rules"]
        return [r.get("resourceNames") for r in rules if r["resources"] == ["pods/exec"]] == [workers]

    # The Role is created without the exec rule and updated once the workers are observed.
    ns.wait_until("the launcher Role names the workers", exec_rule_names_the_workers, timeout=60)
    binding = ns.get(f"rolebinding/{name}-launcher")
    launcher_sa = f"{name}-launcher"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": launcher_sa, "namespace": ns.name}]
    owners = [o for o in binding["metadata"]["ownerReferences"] if o.get("controller")]
    assert [(o["kind"], o["name"]) for o in owners] == [("MPIJob", name)]
    # A policy's denial reaches Metacontroller's log as "... forbidden: ValidatingAdmissionPolicy ...".
    assert "ValidatingAdmissionPolicy" not in release.servers_log("metacontroller")


def test_metacontroller_runs_with_the_narrowed_cluster_role(release: Release) -> None:
    rules = release.values()["metacontroller"]["clusterRole"]["rules"]
    assert not any("*" in r.get("resources", []) and "*" in r.get("apiGroups", []) for r in rules)
    log = release.servers_log("metacontroller")
    # Metacontroller starts a Namespace informer for customize hooks whether a controller has one or not
    # (trainop has none); the role holds no Namespaces (docs/security.md), so that list alone is refused.
    refused = [line for line in log.splitlines() if "forbidden" in line.lower()]
    unexpected = [line for line in refused if 'cannot list resource \\"namespaces\\"' not in line]
    assert not unexpected, "\n".join(unexpected)[-3000:]
    assert '"msg":"Starting CompositeController"' in log


def _ca_bundles(rel: Release) -> dict[str, list[str]]:
    out = {}
    for kind, op in (
        ("mutatingwebhookconfiguration", "mutate"),
        ("validatingwebhookconfiguration", "validate"),
    ):
        cfg = rel.cp.get_json(f"{kind}/{rel.name}-{op}")
        out[op] = [h["clientConfig"].get("caBundle", "") for h in cfg["webhooks"]]
    return out


@pytest.fixture(scope="module")
def upgraded(
    release: Release, every_kind: tuple[Namespace, dict[str, dict[str, Any]]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Upgrade with non-default values; the servers restart as pods would. CA bundles before and after."""
    ns, applied = every_kind
    for kind, obj in applied.items():
        ns.wait_for(
            f"{KINDS[kind]['plural']}.kubeflow.org/{obj['metadata']['name']}", "Succeeded", timeout=120
        )
    before = _ca_bundles(release)
    release.upgrade(
        [
            "webhooks.failurePolicy=Ignore",
            "webhooks.timeoutSeconds=5",
            "compositeController.resyncPeriodSeconds=120",
            "hooks.replicas=3",
            "rbac.aggregateToUserRoles=false",
        ]
    )
    release.stop_servers()
    release.start_servers()
    return before, _ca_bundles(release)


def test_upgrade_keeps_the_webhook_certificate(
    upgraded: tuple[dict[str, list[str]], dict[str, list[str]]],
) -> None:
    before, after = upgraded
    assert all(all(b) for b in before.values())
    assert after == before


def test_upgrade_applies_the_new_values(release: Release, upgraded: object) -> None:
    cfg = release.cp.get_json(f"validatingwebhookconfiguration/{RELEASE}-validate")
    assert [h["failurePolicy"] for h in cfg["webhooks"]] == ["Ignore"]
    assert [h["timeoutSeconds"] for h in cfg["webhooks"]] == [5]
    deploy = release.workload("deployment", f"{RELEASE}-hooks")
    assert deploy["spec"]["replicas"] == 3
    cc = release.cp.get_json(f"compositecontroller/{RELEASE}-pytorchjob-controller")
    assert cc["spec"]["resyncPeriodSeconds"] == 120


def test_jobs_run_after_upgrade(release: Release, upgraded: object) -> None:
    ns = _namespace(release, "chart-after-upgrade")
    res = _dry_run(release, PROBE)
    assert res.returncode != 0 and PROBE_MESSAGE in res.stderr, res.stderr
    obj = example_job("PyTorchJob", kwok_annotations("Succeeded", "1s"))
    ns.apply(obj)
    ns.wait_for(f"pytorchjobs.kubeflow.org/{obj['metadata']['name']}", "Succeeded", timeout=120)


@pytest.fixture(scope="module")
def uninstalled(release: Release, upgraded: object) -> Release:
    """The documented order: delete every job (their children go with them), then `helm uninstall`."""
    release.cp.kubectl("delete", "kubeflow", "--all", "-A", "--wait=true", "--timeout=120s")
    assert release.cp.kubectl("get", "kubeflow", "-A", "-o", "name").stdout.split() == []
    release.uninstall()
    release.stop_servers()
    return release


def test_uninstall_removes_every_object_of_the_release(uninstalled: Release) -> None:
    left = uninstalled.cp.kubectl(
        "get", "deployments,statefulsets,services,serviceaccounts,compositecontrollers,"
        "mutatingwebhookconfigurations,validatingwebhookconfigurations,clusterroles,clusterrolebindings",
        "-A", "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "name",
    ).stdout.split()  # fmt: skip
    assert left == []
    assert uninstalled.helm("status", RELEASE, "-n", NAMESPACE, check=False).returncode != 0


def test_a_second_install_with_non_default_values_runs_jobs(
    cluster: ControlPlane, chart_dir: Path, uninstalled: Release
) -> None:
    rel = Release(cluster, chart_dir, "ops", "ops-system")
    rel.install(["fullnameOverride=ops-trainop", "webhooks.replicas=1", "hooks.replicas=1",
                 "webhooks.podDisruptionBudget.enabled=false", "clusterDomain=cluster.local",
                 "compositeController.hookTimeout=20s"])  # fmt: skip
    rel.start_servers()
    try:
        ns = _namespace(rel, "ops-jobs")
        obj = example_job("TFJob", kwok_annotations("Succeeded", "1s"))
        ns.apply(obj)
        ns.wait_for(f"tfjobs.kubeflow.org/{obj['metadata']['name']}", "Succeeded", timeout=120)
        pod = ns.items("pods", f"training.kubeflow.org/job-name={obj['metadata']['name']}")[0]
        tf_config = next(
            e["value"]
            for c in pod["spec"]["containers"]
            for e in c.get("env", [])
            if e["name"] == "TF_CONFIG"
        )
        assert ".svc.cluster.local:" in tf_config, "clusterDomain reached the hook through the chart"
    finally:
        cluster.kubectl("delete", "kubeflow", "--all", "-A", "--wait=true", "--timeout=120s")
        rel.stop_servers()
        rel.uninstall()
