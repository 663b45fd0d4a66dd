"""The install manifests and the Helm chart: they parse, reference each other correctly, and agree."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from trainop.frameworks import KINDS
from trainop.install import manifests
from trainop.jsontypes import Json

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
CHART = ROOT / "charts" / "trainop"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PLURALS = {info.plural for info in KINDS.values()}
ALL_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def load_all(path: Path) -> list[Json]:
    return [doc for doc in yaml.load_all(path.read_text(), Loader=Loader) if doc is not None]


def kustomized(directory: Path) -> list[Json]:
    """What `kubectl apply -k` would send, for plain kustomizations (resources only, no patches)."""
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        if (directory / name).is_file():
            kustomization = yaml.safe_load((directory / name).read_text())
            break
    else:
        raise AssertionError(f"{directory} has no kustomization")
    docs: list[Json] = []
    for resource in kustomization["resources"]:
        path = directory / resource
        assert path.exists(), f"{directory}: resource {resource} does not exist"
        docs += kustomized(path) if path.is_dir() else load_all(path)
    return docs


@pytest.fixture(scope="module")
def applied() -> list[Json]:
    """Everything `kubectl apply -k manifests/` sends (the CRDs make this slow to parse: once only)."""
    return kustomized(MANIFESTS)


@pytest.fixture(scope="module")
def installed(applied: list[Json]) -> list[Json]:
    return [doc for doc in applied if doc["kind"] != "CustomResourceDefinition"]


def find(docs: Iterable[Json], kind: str, name: str | None = None) -> list[Json]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: Iterable[Json], kind: str, name: str) -> Json:
    [doc] = find(docs, kind, name)
    return doc


def test_every_yaml_parses_and_every_manifest_is_installed() -> None:
    listed = set(yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"])
    optional = {"kustomization.yaml"}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        assert load_all(path), path
        assert path.name in listed | optional, f"{path.name} is not in manifests/kustomization.yaml"
    for path in sorted(CHART.glob("*.yaml")) + sorted((CHART / "files").glob("*.yaml")):
        assert load_all(path), path


def test_kustomization_lists_every_kind(applied: list[Json], installed: list[Json]) -> None:
    crds = [d for d in applied if d["kind"] == "CustomResourceDefinition"]
    assert {d["spec"]["names"]["kind"] for d in crds} == set(KINDS)
    assert {
        d["spec"]["parentResource"]["resource"] for d in find(installed, "CompositeController")
    } == PLURALS
    cluster_scoped = {
        "Namespace",
        "CompositeController",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for doc in installed:
        if doc["kind"] not in cluster_scoped and "Webhook" not in doc["kind"]:
            assert doc["metadata"]["namespace"] == manifests.NAMESPACE, doc["metadata"]["name"]


def test_composite_controllers_call_the_hooks_service(installed: list[Json]) -> None:
    service = one(installed, "Service", manifests.HOOKS_NAME)
    [port] = [p for p in service["spec"]["ports"] if p["name"] != "metrics"]
    assert port["port"] == 80
    base = f"http://{manifests.HOOKS_NAME}.{manifests.NAMESPACE}"
    for cc in find(installed, "CompositeController"):
        spec = cc["spec"]
        assert spec["generateSelector"] is True
        assert spec["parentResource"]["apiVersion"] == "kubeflow.org/v1"
        assert spec["hooks"] == {  # no finalize hook
            "sync": {"webhook": {"url": f"{base}/sync", "timeout": "45s"}},
            "customize": {"webhook": {"url": f"{base}/customize", "timeout": "45s"}},
        }
        assert 30 <= spec["resyncPeriodSeconds"] <= 3600
        children = {
            (c["apiVersion"], c["resource"]): c["updateStrategy"]["method"] for c in spec["childResources"]
        }
        assert children[("v1", "pods")] == "OnDelete"
        assert children[("v1", "services")] == "InPlace"
        # A TensorBoard of any kind of job.
        assert children[("apps/v1", "deployments")] == "InPlace"
        assert children[("networking.k8s.io/v1", "networkpolicies")] == "InPlace"
    mpi = one(installed, "CompositeController", "trainop-mpijob-controller")["spec"]["childResources"]
    assert {c["resource"] for c in mpi} >= {"configmaps", "serviceaccounts", "roles", "rolebindings"}
    torch = one(installed, "CompositeController", "trainop-pytorchjob-controller")["spec"]["childResources"]
    assert {"apiVersion": "autoscaling/v2", "resource": "horizontalpodautoscalers"} in [
        {k: c[k] for k in ("apiVersion", "resource")} for c in torch
    ]


def test_webhook_configurations_cover_every_kind(installed: list[Json]) -> None:
    service = one(installed, "Service", manifests.WEBHOOKS_NAME)
    [port] = [p for p in service["spec"]["ports"] if p["name"] != "metrics"]
    for kind, path in (
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ):
        [config] = find(installed, kind)
        [hook] = config["webhooks"]
        assert hook["clientConfig"]["service"] == {
            "name": manifests.WEBHOOKS_NAME,
            "namespace": manifests.NAMESPACE,
            "path": path,
            "port": port["port"],
        }
        assert (hook["failurePolicy"], hook["sideEffects"], hook["admissionReviewVersions"]) == (
            "Fail",
            "None",
            ["v1"],
        )
        [rule] = hook["rules"]
        assert set(rule["resources"]) == PLURALS
        assert (rule["apiGroups"], rule["apiVersions"], rule["operations"]) == (
            ["kubeflow.org"],
            ["v1"],
            ["CREATE", "UPDATE"],
        )
        [expr] = hook["namespaceSelector"]["matchExpressions"]
        assert expr["operator"] == "NotIn" and set(expr["values"]) == {"kube-system", "trainop-system"}


def pod_spec(docs: Iterable[Json], name: str) -> Json:
    spec: Json = one(docs, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def test_servers_run_locked_down(installed: list[Json]) -> None:
    for name, module, port in (
        (manifests.HOOKS_NAME, "hooks", 8080),
        (manifests.WEBHOOKS_NAME, "webhooks", 9443),
    ):
        spec = pod_spec(installed, name)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        [container] = spec["containers"]
        assert container["command"] == [
            "gunicorn",
            "-c",
            f"python:{module}.gunicorn_conf",
            f"{module}.app:app",
        ]
        assert container["ports"][0]["containerPort"] == port
        assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]
    # The hooks talk to the API for TTL deletion; of the webhook pod only cert-rotator does.
    assert pod_spec(installed, manifests.HOOKS_NAME)["automountServiceAccountToken"] is True
    assert pod_spec(installed, manifests.WEBHOOKS_NAME)["automountServiceAccountToken"] is False


def test_of_the_webhook_pod_only_the_cert_rotator_holds_the_token(installed: list[Json]) -> None:
    """The serving container parses every AdmissionReview; a token there could be stolen by a request."""
    webhooks = pod_spec(installed, manifests.WEBHOOKS_NAME)
    [rotator], [server] = webhooks["initContainers"], webhooks["containers"]
    token = next(v for v in webhooks["volumes"] if v["name"] == "api-token")
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}} in token["projected"][
        "sources"
    ]
    token_path = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert {"name": "api-token", "mountPath": token_path, "readOnly": True} in rotator["volumeMounts"]
    assert all(m["name"] != "api-token" for m in server["volumeMounts"])
    assert rotator["restartPolicy"] == "Always"
    assert rotator["command"] == ["python", "-m", "webhooks.certrotate"]
    assert rotator["startupProbe"]["exec"]["command"] == [*rotator["command"], "--check"]


def webhook_env(docs: Iterable[Json], name: str = manifests.WEBHOOKS_NAME) -> dict[str, str]:
    [container] = pod_spec(docs, name)["containers"]
    return {e["name"]: e["value"] for e in container["env"]}


def rotator_env(docs: Iterable[Json], name: str = manifests.WEBHOOKS_NAME) -> dict[str, str]:
    [container] = pod_spec(docs, name)["initContainers"]
    return {e["name"]: e["value"] for e in container["env"]}


def test_the_webhook_server_keeps_its_own_certificate_by_default(installed: list[Json]) -> None:
    """No cert-manager and no hand-made Secret: cert-rotator is told its Secret, Service and
    configurations, and the server serves the file it writes into the volume they share."""
    server = webhook_env(installed)
    assert server["TRAINOP_WEBHOOK_CERT_MODE"] == "files"
    env = rotator_env(installed)
    assert server["TRAINOP_TLS_CERT_FILE"] == server["TRAINOP_TLS_KEY_FILE"]
    assert server["TRAINOP_TLS_CERT_FILE"] == env["TRAINOP_WEBHOOK_CERT_DIR"] + "/tls.pem"
    assert env["TRAINOP_WEBHOOK_NAMESPACE"] == manifests.NAMESPACE
    assert env["TRAINOP_WEBHOOK_CERT_SECRET"] == manifests.WEBHOOK_CERT
    one(installed, "Service", env["TRAINOP_WEBHOOK_SERVICE"])
    one(installed, "MutatingWebhookConfiguration", env["TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS"])
    one(installed, "ValidatingWebhookConfiguration", env["TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS"])
    webhooks = pod_spec(installed, manifests.WEBHOOKS_NAME)
    # No Secret to mount: the serving file is on a tmpfs both containers mount.
    assert [v["name"] for v in webhooks["volumes"]] == ["tmp", "serving-cert", "rotator-tmp", "api-token"]
    [rotator], [container] = webhooks["initContainers"], webhooks["containers"]
    for c in (rotator, container):
        [mount] = [m for m in c["volumeMounts"] if m["name"] == "serving-cert"]
        assert mount["mountPath"] == env["TRAINOP_WEBHOOK_CERT_DIR"]
    # Installed objects never carry a CA or a Secret: both would be reset by every re-apply.
    assert not find(installed, "Secret")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for config in find(installed, kind):
            assert "annotations" not in config["metadata"]
            assert all("caBundle" not in hook["clientConfig"] for hook in config["webhooks"])


def webhook_rbac(docs: Iterable[Json], name: str, namespace: str) -> dict[tuple[str, str], list[str]]:
    """The permissions the webhooks' ServiceAccount holds, as {(resource, name or "*"): verbs}."""
    account = pod_spec(docs, name)["serviceAccountName"]
    granted: dict[tuple[str, str], set[str]] = {}
    for binding_kind, role_kind in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        for binding in find(docs, binding_kind):
            if {"kind": "ServiceAccount", "name": account, "namespace": namespace} not in binding["subjects"]:
                continue
            assert binding["roleRef"]["kind"] == role_kind
            for rule in one(docs, role_kind, binding["roleRef"]["name"])["rules"]:
                for resource in rule["resources"]:
                    for resource_name in rule.get("resourceNames") or ["*"]:
                        granted.setdefault((resource, resource_name), set()).update(rule["verbs"])
    return {key: sorted(verbs) for key, verbs in granted.items()}


def test_the_webhooks_may_touch_only_their_secret_and_their_two_configurations(installed: list[Json]) -> None:
    assert webhook_rbac(installed, manifests.WEBHOOKS_NAME, manifests.NAMESPACE) == {
        ("secrets", "*"): ["create"],
        ("secrets", manifests.WEBHOOK_CERT): ["get", "update"],
        ("mutatingwebhookconfigurations", "trainop-mutate"): ["get", "patch"],
        ("validatingwebhookconfigurations", "trainop-validate"): ["get", "patch"],
    }
    role = one(installed, "Role", manifests.WEBHOOKS_NAME)
    assert role["metadata"]["namespace"] == manifests.NAMESPACE


@pytest.fixture(scope="module")
def kubectl() -> str:
    """kubectl (asking for it puts a test in the e2e tier: tests/conftest.py)."""
    for candidate in (
        str(Path(os.environ.get("TRAINOP_E2E_CACHE", Path.home() / ".cache/trainop-e2e")) / "bin/kubectl"),
        shutil.which("kubectl"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("kubectl not found: run hack/build-control-plane.sh (it installs kubectl)")


def test_the_cert_manager_component_switches_the_webhooks_to_cert_managers_secret(
    kubectl: str, tmp_path: Path
) -> None:
    """manifests/cert-manager/ used as its kustomization.yaml says: from a kustomization of one's own."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(MANIFESTS, site)],
                "components": [os.path.relpath(MANIFESTS / "cert-manager", site)],
            }
        )
    )
    result = subprocess.run(
        [kubectl, "kustomize", str(site)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.load_all(result.stdout, Loader=Loader) if d is not None]
    certificate = one(docs, "Certificate", manifests.WEBHOOK_CERT)["spec"]
    service = f"{manifests.WEBHOOKS_NAME}.{manifests.NAMESPACE}.svc"
    assert certificate["secretName"] == manifests.WEBHOOK_CERT
    assert certificate["dnsNames"] == [service, f"{service}.cluster.local"]
    one(docs, "Issuer", certificate["issuerRef"]["name"])
    webhooks = pod_spec(docs, manifests.WEBHOOKS_NAME)
    assert webhooks["automountServiceAccountToken"] is False
    env = webhook_env(docs)
    assert env["TRAINOP_WEBHOOK_CERT_MODE"] == "files"
    [container] = webhooks["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["TRAINOP_TLS_CERT_FILE"] == f"{mounts['tls']}/tls.crt"
    assert env["TRAINOP_TLS_KEY_FILE"] == f"{mounts['tls']}/tls.key"
    tls = next(v for v in webhooks["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == manifests.WEBHOOK_CERT
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        [config] = find(docs, kind)
        annotation = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert annotation == f"{manifests.NAMESPACE}/{manifests.WEBHOOK_CERT}"


def test_hooks_may_only_get_and_delete_jobs_and_record_events(installed: list[Json]) -> None:
    role = one(installed, "ClusterRole", manifests.HOOKS_NAME)
    [rule, events] = role["rules"]
    assert rule["apiGroups"] == ["kubeflow.org"] and set(rule["resources"]) == PLURALS
    assert sorted(rule["verbs"]) == ["delete", "get", "list"]
    assert events == {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
    binding = one(installed, "ClusterRoleBinding", manifests.HOOKS_NAME)
    assert binding["roleRef"]["name"] == manifests.HOOKS_NAME
    [subject] = binding["subjects"]
    assert (subject["name"], subject["namespace"]) == (
        pod_spec(installed, manifests.HOOKS_NAME)["serviceAccountName"],
        manifests.NAMESPACE,
    )
    edit = one(installed, "ClusterRole", "trainop-edit")
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    view = one(installed, "ClusterRole", "trainop-view")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert set(view["rules"][0]["resources"]) == PLURALS and view["rules"][0]["verbs"] == [
        "get",
        "list",
        "watch",
    ]


def test_chart_depends_on_metacontroller() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["dependencies"] == [
        {
            "name": "metacontroller-helm",
            "version": "4.17.2",
            "repository": "oci://ghcr.io/metacontroller",
            "alias": "metacontroller",
            "condition": "metacontroller.enabled",
        }
    ]


def test_chart_metacontroller_rules_cover_every_parent_and_child() -> None:
    rules = yaml.safe_load((CHART / "values.yaml").read_text())["metacontroller"]["clusterRole"]["rules"]

    def verbs(group: str, resource: str) -> set[str]:
        found: set[str] = set()
        for rule in rules:
            if group in rule["apiGroups"] and resource in rule["resources"]:
                found |= set(rule["verbs"])
        return found

    for plural in PLURALS:
        assert verbs("kubeflow.org", plural) >= {"get", "list", "watch", "update"}
        assert "update" in verbs("kubeflow.org", f"{plural}/status")
    children = [c for info in KINDS.values() for c in manifests.child_resources(info)]
    for child in [*children, *(c.rule() for c in manifests.PODGROUP_CHILDREN.values())]:
        group = child["apiVersion"].rpartition("/")[0]
        assert verbs(group, child["resource"]) >= ALL_VERBS, child


def helm_template(helm: tuple[str, Path], *settings: str) -> subprocess.CompletedProcess[str]:
    binary, chart = helm
    args = [binary, "template", "trainop", str(chart), "-n", manifests.NAMESPACE]
    for setting in ("metacontroller.enabled=false", *settings):
        args += ["--set", setting]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def render(helm: tuple[str, Path], *settings: str) -> list[Json]:
    result = helm_template(helm, *settings)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.load_all(result.stdout, Loader=Loader) if d is not None]


def test_helm_lint(helm: tuple[str, Path]) -> None:
    binary, copy = helm
    for chart in (CHART, copy):
        result = subprocess.run(
            [binary, "lint", str(chart), "--set", "metacontroller.enabled=false"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def without_labels(doc: Json) -> Json:
    return {k: v for k, v in doc.items() if k != "metadata"}


def without_selector(constraint: Json) -> Json:
    """The chart's selectors also name the release (app.kubernetes.io/instance); the manifests have none."""
    return {k: v for k, v in constraint.items() if k != "labelSelector"}


def without_accelerators(spec: Json) -> Json:
    """A server's pod without the accelerator profiles, which the chart always mounts and the manifests
    only with their component (tests/install/test_accelerator_profiles_install.py checks both)."""
    [container] = spec["containers"]
    container = {
        **container,
        "env": [e for e in container["env"] if e["name"] != "TRAINOP_ACCELERATOR_PROFILES"],
        "volumeMounts": [m for m in container["volumeMounts"] if m["name"] != "accelerators"],
    }
    volumes = [v for v in spec["volumes"] if v["name"] != "accelerators"]
    return {**spec, "containers": [container], "volumes": volumes}


def test_chart_renders_what_the_manifests_install(helm: tuple[str, Path], installed: list[Json]) -> None:
    rendered = render(helm)
    for kind in ("CompositeController", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        ours = sorted(find(installed, kind), key=lambda d: d["metadata"]["name"])
        theirs = sorted(find(rendered, kind), key=lambda d: d["metadata"]["name"])
        assert [d["metadata"]["name"] for d in theirs] == [d["metadata"]["name"] for d in ours]
        for mine, chart in zip(ours, theirs, strict=True):
            if kind == "CompositeController":
                assert chart["spec"] == mine["spec"]
            else:
                [a], [b] = mine["webhooks"], chart["webhooks"]
                assert {**b, "rules": None} == {**a, "rules": None}
                assert set(b["rules"][0]["resources"]) == set(a["rules"][0]["resources"])
    assert webhook_rbac(rendered, manifests.WEBHOOKS_NAME, manifests.NAMESPACE) == webhook_rbac(
        installed, manifests.WEBHOOKS_NAME, manifests.NAMESPACE
    )
    for name in ("trainop-hooks", "trainop-edit", "trainop-view"):
        mine_rules = one(installed, "ClusterRole", name)["rules"]
        chart_rules = one(rendered, "ClusterRole", name)["rules"]
        assert [(r["verbs"], sorted(r["resources"])) for r in chart_rules] == [
            (r["verbs"], sorted(r["resources"])) for r in mine_rules
        ]
    for name in (manifests.HOOKS_NAME, manifests.WEBHOOKS_NAME):
        mine_pod, chart_pod = pod_spec(installed, name), without_accelerators(pod_spec(rendered, name))
        [a], [b] = mine_pod["containers"], chart_pod["containers"]
        for key in ("command", "ports", "readinessProbe", "livenessProbe", "securityContext", "volumeMounts"):
            assert b[key] == a[key], (name, key)
        assert {e["name"]: e["value"] for e in a["env"]}.items() <= {
            e["name"]: e["value"] for e in b["env"]
        }.items()
        for key in ("automountServiceAccountToken", "securityContext", "volumes", "serviceAccountName"):
            assert chart_pod[key] == mine_pod[key], (name, key)
        assert mine_pod["priorityClassName"] == chart_pod["priorityClassName"]
        assert [without_selector(c) for c in mine_pod["topologySpreadConstraints"]] == [
            without_selector(c) for c in chart_pod["topologySpreadConstraints"]
        ]
        for a, b in zip(mine_pod.get("initContainers", []), chart_pod.get("initContainers", []), strict=True):
            for key in (
                "name",
                "restartPolicy",
                "command",
                "env",
                "startupProbe",
                "securityContext",
                "volumeMounts",
            ):
                assert b[key] == a[key], (name, key)
        assert (
            without_labels(one(rendered, "Service", name))["spec"]["ports"]
            == one(installed, "Service", name)["spec"]["ports"]
        )
        mine_budget, chart_budget = (
            one(installed, "PodDisruptionBudget", name),
            one(rendered, "PodDisruptionBudget", name),
        )
        assert mine_budget["spec"]["minAvailable"] == chart_budget["spec"]["minAvailable"]
        assert mine_budget["spec"]["selector"]["matchLabels"].items() <= (
            chart_budget["spec"]["selector"]["matchLabels"].items()
        )


def test_chart_options(helm: tuple[str, Path]) -> None:
    rendered = render(
        helm,
        "gangScheduler=volcano",
        "certManager.enabled=true",
        "webhooks.failurePolicy=Ignore",
        "rbac.aggregateToUserRoles=false",
    )
    for cc in find(rendered, "CompositeController"):
        assert cc["spec"]["childResources"][-1] == manifests.PODGROUP_CHILDREN["volcano"].rule()
    [certificate] = find(rendered, "Certificate")
    assert certificate["spec"]["secretName"] == manifests.WEBHOOK_CERT
    assert certificate["spec"]["dnsNames"][0] == f"{manifests.WEBHOOKS_NAME}.{manifests.NAMESPACE}.svc"
    # cert-manager's Secret, mounted; the server needs no API access and gets no role.
    assert webhook_env(rendered)["TRAINOP_WEBHOOK_CERT_MODE"] == "files"
    assert pod_spec(rendered, manifests.WEBHOOKS_NAME)["automountServiceAccountToken"] is False
    assert webhook_rbac(rendered, manifests.WEBHOOKS_NAME, manifests.NAMESPACE) == {}
    for config in find(rendered, "ValidatingWebhookConfiguration") + find(
        rendered, "MutatingWebhookConfiguration"
    ):
        annotation = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert annotation == f"{manifests.NAMESPACE}/{manifests.WEBHOOK_CERT}"
        assert config["webhooks"][0]["failurePolicy"] == "Ignore"
    assert not find(rendered, "ClusterRole", "trainop-edit")
    env = {e["name"]: e["value"] for e in pod_spec(rendered, manifests.HOOKS_NAME)["containers"][0]["env"]}
    assert env["TRAINOP_GANG_SCHEDULER"] == "volcano"

    plugins = render(helm, "gangScheduler=scheduler-plugins-scheduler", "webhooks.caBundle=Q0E=")
    for cc in find(plugins, "CompositeController"):
        assert cc["spec"]["childResources"][-1] == manifests.PODGROUP_CHILDREN["scheduler-plugins"].rule()
    for config in find(plugins, "ValidatingWebhookConfiguration"):
        assert config["webhooks"][0]["clientConfig"]["caBundle"] == "Q0E="
        assert "annotations" not in config["metadata"]
    # A CA of one's own means a Secret of one's own, mounted as files.
    assert webhook_env(plugins)["TRAINOP_WEBHOOK_CERT_MODE"] == "files"
    tls = next(v for v in pod_spec(plugins, manifests.WEBHOOKS_NAME)["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == manifests.WEBHOOK_CERT


@pytest.mark.parametrize("setting", ["kubernetes", "Kubernetes"])
def test_chart_with_kube_schedulers_gang_lists_its_pod_group_child(
    helm: tuple[str, Path], setting: str
) -> None:
    rendered = render(helm, f"gangScheduler={setting}")
    for cc in find(rendered, "CompositeController"):
        assert cc["spec"]["childResources"][-1] == {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "resource": "podgroups",
            "updateStrategy": {"method": "OnDelete"},
        }


def test_chart_names_the_certificate_after_the_release(helm: tuple[str, Path]) -> None:
    """Self mode under other names: env, RBAC and the development URL's host in the certificate agree."""
    rendered = render(helm, "fullnameOverride=ops", "development.webhooksURL=https://127.0.0.1:9443/")
    assert webhook_env(rendered, "ops-webhooks")["TRAINOP_WEBHOOK_CERT_MODE"] == "files"
    env = rotator_env(rendered, "ops-webhooks")
    assert env["TRAINOP_WEBHOOK_CERT_SECRET"] == "ops-webhook-cert"
    assert env["TRAINOP_WEBHOOK_SERVICE"] == "ops-webhooks"
    assert env["TRAINOP_WEBHOOK_CERT_HOSTS"] == "127.0.0.1"
    one(rendered, "MutatingWebhookConfiguration", env["TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS"])
    one(rendered, "ValidatingWebhookConfiguration", env["TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS"])
    assert webhook_rbac(rendered, "ops-webhooks", manifests.NAMESPACE) == {
        ("secrets", "*"): ["create"],
        ("secrets", "ops-webhook-cert"): ["get", "update"],
        ("mutatingwebhookconfigurations", "ops-mutate"): ["get", "patch"],
        ("validatingwebhookconfigurations", "ops-validate"): ["get", "patch"],
    }
    assert one(rendered, "ServiceAccount", "ops-webhooks")["automountServiceAccountToken"] is False


def test_the_webhook_server_adopts_a_certificate_secret_it_did_not_create_only_when_told(
    installed: list[Json], helm: tuple[str, Path]
) -> None:
    assert rotator_env(installed)["TRAINOP_WEBHOOK_CERT_ADOPT"] == "false"
    assert rotator_env(render(helm))["TRAINOP_WEBHOOK_CERT_ADOPT"] == "false"
    adopting = render(helm, "webhooks.adoptCertSecret=true")
    assert rotator_env(adopting)["TRAINOP_WEBHOOK_CERT_ADOPT"] == "true"


@pytest.mark.parametrize("period", ["0", "null"])
def test_the_chart_refuses_a_composite_controller_without_a_resync_period(
    helm: tuple[str, Path], period: str
) -> None:
    # The period bounds how long a job waits after failed syncs (a hooks outage): without one it is
    # Metacontroller's backoff, up to 1000 s.
    result = helm_template(helm, f"compositeController.resyncPeriodSeconds={period}")
    assert result.returncode != 0
    assert "compositeController.resyncPeriodSeconds must be at least 1" in result.stderr


def test_the_chart_registers_its_resync_period_on_every_controller(helm: tuple[str, Path]) -> None:
    docs = render(helm, "compositeController.resyncPeriodSeconds=120")
    periods = {d["spec"]["resyncPeriodSeconds"] for d in docs if d["kind"] == "CompositeController"}
    assert periods == {120}
