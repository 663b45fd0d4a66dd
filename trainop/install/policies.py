"""ValidatingAdmissionPolicies that hold trainop's own ServiceAccounts to what they are for.

RBAC cannot say "only the caBundle field", "only Events about kubeflow.org jobs" or "only this one user
may write that Secret"; the apiserver's CEL admission policies can, and they apply to every request,
whatever the caller's RBAC (docs/security.md#admission-policies):

* the webhook ServiceAccount may update only `caBundle` of its two webhook configurations: every other
  field of every webhook, the list of webhooks, labels and annotations stay as the install wrote them;
* only the webhook ServiceAccount may create or update the webhook's certificate Secret (self-managed
  certificate only; deleting it stays open to whoever RBAC allows, which makes the server issue a new one);
* the hooks ServiceAccount may create Events only about kubeflow.org jobs, as that kind's controller
  (`source.component`), and patch only such Events, changing nothing but the count, the timestamps and
  the occurrence annotation;
* the hooks ServiceAccount may delete only a finished job (Succeeded or Failed) that sets
  ttlSecondsAfterFinished: its TTL deletion, and nothing a forged sync could ask for;
* the bundled Metacontroller may write only MPI launchers' Roles and RoleBindings, in the shape
  `trainop.frameworks.mpi` desires them: RBAC lets it write a Role with any permission it holds
  (`pods/exec` among them, for the launcher) and bind it to anyone, in any namespace.

The expressions are built here once; `generated_manifests` writes them into manifests/ with the default
names and into charts/trainop/files/ for the chart's templates, which add the release's names as
policy variables (the chart's matchConditions name the ServiceAccounts themselves).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from trainop.api.constants import GROUP
from trainop.api.kinds import KindInfo
from trainop.frameworks import KINDS
from trainop.jsontypes import Json

API_VERSION = "admissionregistration.k8s.io/v1"
WEBHOOK_CONFIGURATION_RESOURCES = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")

# Every field of a v1 MutatingWebhook / ValidatingWebhook but clientConfig.caBundle; optional ones are
# compared as "both unset, or both set and equal" (a field the apiserver defaults is set on both sides).
_REQUIRED_WEBHOOK_FIELDS = ("name", "sideEffects", "admissionReviewVersions")
_OPTIONAL_WEBHOOK_FIELDS = (
    "rules",
    "failurePolicy",
    "matchPolicy",
    "namespaceSelector",
    "objectSelector",
    "timeoutSeconds",
    "matchConditions",
    "reinvocationPolicy",
    "clientConfig.url",
    "clientConfig.service",
)


def _same(old: str, new: str, field: str) -> str:
    return f"{old}.{field} == {new}.{field}"


def _same_optional(old: str, new: str, field: str) -> str:
    parent, _, leaf = field.rpartition(".")
    o, n = (f"{old}.{parent}" if parent else old), (f"{new}.{parent}" if parent else new)
    return f"(has({o}.{leaf}) ? has({n}.{leaf}) && {o}.{leaf} == {n}.{leaf} : !has({n}.{leaf}))"


def _same_metadata(field: str) -> str:
    return (
        f"(has(oldObject.metadata.{field}) ? oldObject.metadata.{field} : {{}}) == "
        f"(has(object.metadata.{field}) ? object.metadata.{field} : {{}})"
    )


UNCHANGED_BUT_CA_BUNDLE = (
    "object.webhooks.size() == oldObject.webhooks.size() && object.webhooks.all(w, "
    "oldObject.webhooks.exists_one(o, "
    + " && ".join(
        [_same("o", "w", f) for f in _REQUIRED_WEBHOOK_FIELDS]
        + [_same_optional("o", "w", f) for f in _OPTIONAL_WEBHOOK_FIELDS]
    )
    + "))"
)

WEBHOOK_CONFIGURATION_VALIDATIONS: tuple[Json, ...] = (
    {
        "expression": 'request.operation == "UPDATE" && object.metadata.name in variables.configurations',
        "message": "the webhook ServiceAccount may only update its own two webhook configurations",
        "reason": "Forbidden",
    },
    {
        "expression": f"{_same_metadata('labels')} && {_same_metadata('annotations')}",
        "message": "the webhook ServiceAccount may not change labels or annotations of its configurations",
        "reason": "Forbidden",
    },
    {
        "expression": UNCHANGED_BUT_CA_BUNDLE,
        "message": (
            "the webhook ServiceAccount may change only clientConfig.caBundle of a webhook: "
            "rules, selectors, failurePolicy, timeouts, the service and the webhooks stay as installed"
        ),
        "reason": "Forbidden",
    },
)

CERT_SECRET_VALIDATIONS: tuple[Json, ...] = (
    {
        "expression": "request.userInfo.username == variables.writer",
        "messageExpression": (
            '"only " + variables.writer + " may create or update the webhook certificate Secret "'
            ' + request.name + "; delete the Secret to have the webhook server issue a new one"'
        ),
        "reason": "Forbidden",
    },
)

_EVENT_IS_OURS = (
    "has(object.involvedObject.apiVersion) && "
    f'object.involvedObject.apiVersion.startsWith("{GROUP}/") && '
    "has(object.involvedObject.kind) && object.involvedObject.kind in variables.controllers && "
    "has(object.source) && has(object.source.component) && "
    "object.source.component == variables.controllers[object.involvedObject.kind]"
)
_EVENT_KEEPS = ("involvedObject", "source", "reason", "message", "type")

HOOKS_EVENT_VALIDATIONS: tuple[Json, ...] = (
    {
        "expression": _EVENT_IS_OURS,
        "message": (
            f"the hooks ServiceAccount may only write Events about {GROUP} jobs, "
            "with source.component the job kind's controller"
        ),
        "reason": "Forbidden",
    },
    {
        "expression": 'request.operation == "CREATE" || ('
        + " && ".join(_same_optional("oldObject", "object", f) for f in _EVENT_KEEPS)
        + ")",
        "message": (
            "the hooks ServiceAccount may only aggregate its own Events (count, timestamps, annotations): "
            "involvedObject, source, reason, message and type stay as created"
        ),
        "reason": "Forbidden",
    },
)


HOOKS_JOB_DELETION_VALIDATIONS: tuple[Json, ...] = (
    {
        "expression": (
            "has(oldObject.status) && has(oldObject.status.conditions) && "
            'oldObject.status.conditions.exists(c, c.type in ["Succeeded", "Failed"] && c.status == "True") '
            "&& has(oldObject.spec.runPolicy) && has(oldObject.spec.runPolicy.ttlSecondsAfterFinished)"
        ),
        "message": (
            "the hooks ServiceAccount may delete only a finished job (Succeeded or Failed) that sets "
            "runPolicy.ttlSecondsAfterFinished"
        ),
        "reason": "Forbidden",
    },
)


# A launcher's Role and RoleBinding are `<job>-launcher`, controlled by MPIJob `<job>`; its Role names the
# job's workers `<job>-worker-<index>` (trainop.frameworks.mpi.Mpi.extra_children).
LAUNCHER_SUFFIX = "-launcher"
# The kind whose jobs have a launcher's RBAC among their children.
LAUNCHER_KIND = next(i.kind for i in KINDS.values() if LAUNCHER_SUFFIX[1:] in i.extra_child_suffixes)
LAUNCHER_VARIABLES: tuple[Json, ...] = (
    {
        "name": "job",
        "expression": (
            f'object.metadata.name.endsWith("{LAUNCHER_SUFFIX}") ? object.metadata.name.substring(0, '
            f'size(object.metadata.name) - {len(LAUNCHER_SUFFIX)}) : ""'
        ),
    },
    {"name": "workers", "expression": 'variables.job + "-worker-"'},
)

_CONTROLLED_BY_ITS_MPIJOB = (
    'variables.job != "" && has(object.metadata.ownerReferences) && '
    "object.metadata.ownerReferences.exists(o, has(o.controller) && o.controller && "
    f'o.apiVersion.startsWith("{GROUP}/") && o.kind == "{LAUNCHER_KIND}" && o.name == variables.job)'
)
_LAUNCHER_OWNED: Json = {
    "expression": _CONTROLLED_BY_ITS_MPIJOB,
    "messageExpression": (
        f"\"Metacontroller may write a Role or RoleBinding only as an {LAUNCHER_KIND}'s launcher RBAC, named "
        f'<job>-launcher with a controller reference to {LAUNCHER_KIND} <job>; refused: " + '
        'request.namespace + "/" + object.metadata.name'
    ),
    "reason": "Forbidden",
}
_PODS_READ = (
    'r.apiGroups == [""] && r.resources == ["pods"] && r.verbs == ["get", "list", "watch"] && '
    "(!has(r.resourceNames) || r.resourceNames.size() == 0) && !has(r.nonResourceURLs)"
)
_EXEC_INTO_WORKERS = (
    'r.apiGroups == [""] && r.resources == ["pods/exec"] && r.verbs == ["create"] && '
    "has(r.resourceNames) && r.resourceNames.size() > 0 && r.resourceNames.all(n, "
    'n.startsWith(variables.workers) && n.substring(size(variables.workers)).matches("^[0-9]+$")) && '
    "!has(r.nonResourceURLs)"
)
LAUNCHER_ROLE_VALIDATIONS: tuple[Json, ...] = (
    _LAUNCHER_OWNED,
    {
        "expression": (
            "has(object.rules) && object.rules.size() >= 1 && object.rules.size() <= 2 && "
            f"[object.rules[0]].all(r, {_PODS_READ}) && "
            f"(object.rules.size() == 1 || [object.rules[1]].all(r, {_EXEC_INTO_WORKERS}))"
        ),
        "message": (
            "a launcher Role may grant only get, list, watch on pods and create on pods/exec of its "
            "job's workers by name (<job>-worker-<index>)"
        ),
        "reason": "Forbidden",
    },
)
LAUNCHER_ROLE_BINDING_VALIDATIONS: tuple[Json, ...] = (
    _LAUNCHER_OWNED,
    {
        "expression": (
            'object.roleRef.apiGroup == "rbac.authorization.k8s.io" && object.roleRef.kind == "Role" && '
            "object.roleRef.name == object.metadata.name && has(object.subjects) && "
            'object.subjects.size() == 1 && object.subjects.all(s, s.kind == "ServiceAccount" && '
            '(!has(s.apiGroup) || s.apiGroup == "") && has(s.namespace) && s.namespace == request.namespace)'
        ),
        "message": (
            "a launcher RoleBinding may bind only the Role of its own name, to one ServiceAccount of its "
            "own namespace"
        ),
        "reason": "Forbidden",
    },
)
LAUNCHER_RBAC_VALIDATIONS = {
    "roles": LAUNCHER_ROLE_VALIDATIONS,
    "rolebindings": LAUNCHER_ROLE_BINDING_VALIDATIONS,
}


def service_account_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def cel_string(value: str) -> str:
    """A CEL string literal (JSON's quoting is valid CEL for the names used here)."""
    if any(c in value for c in '"\\\n'):
        raise ValueError(f"not a plain name: {value!r}")
    return f'"{value}"'


def cel_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


def controllers_map(kinds: Iterable[KindInfo]) -> str:
    return "{" + ", ".join(f"{cel_string(k.kind)}: {cel_string(k.controller_name)}" for k in kinds) + "}"


def _rule(group: str, version: str, operations: Sequence[str], resources: Sequence[str]) -> Json:
    """A policy's match rule: these operations on these resources of one API group."""
    return {
        "apiGroups": [group],
        "apiVersions": [version],
        "operations": list(operations),
        "resources": list(resources),
    }


def _policy(
    name: str,
    labels: Mapping[str, str],
    rules: list[Json],
    match_user: str,
    variables: list[Json],
    validations: Sequence[Json],
    namespace: str | None = None,
) -> list[Json]:
    constraints: Json = {"resourceRules": rules}
    if namespace is not None:
        constraints["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": constraints,
                "matchConditions": [{"name": "caller", "expression": match_user}],
                **({"variables": variables} if variables else {}),
                "validations": [dict(v) for v in validations],
            },
        },
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    ]


def admission_policies(
    kinds: Sequence[KindInfo],
    *,
    prefix: str,
    namespace: str,
    hooks_account: str,
    webhooks_account: str,
    configurations: Sequence[str],
    cert_secret: str | None,
    labels: Mapping[str, str],
) -> list[Json]:
    """The policies and their bindings; without `cert_secret` no policy for it (cert-manager writes it)."""
    webhooks_user = service_account_user(namespace, webhooks_account)
    docs = _policy(
        f"{prefix}-webhooks-ca-bundle-only",
        labels,
        [
            _rule(
                "admissionregistration.k8s.io",
                "v1",
                ("CREATE", "UPDATE", "DELETE"),
                list(WEBHOOK_CONFIGURATION_RESOURCES),
            )
        ],
        f"request.userInfo.username == {cel_string(webhooks_user)}",
        [{"name": "configurations", "expression": cel_list(configurations)}],
        WEBHOOK_CONFIGURATION_VALIDATIONS,
    )
    if cert_secret is not None:
        docs += _policy(
            f"{prefix}-webhook-cert-writer",
            labels,
            [_rule("", "v1", ("CREATE", "UPDATE"), ["secrets"])],
            f"request.name == {cel_string(cert_secret)}",
            [{"name": "writer", "expression": cel_string(webhooks_user)}],
            CERT_SECRET_VALIDATIONS,
            namespace=namespace,
        )
    hooks_user = f"request.userInfo.username == {cel_string(service_account_user(namespace, hooks_account))}"
    docs += _policy(
        f"{prefix}-hooks-job-deletion",
        labels,
        [_rule(GROUP, "*", ("DELETE",), [k.plural for k in kinds])],
        hooks_user,
        [],
        HOOKS_JOB_DELETION_VALIDATIONS,
    )
    docs += _policy(
        f"{prefix}-hooks-events",
        labels,
        [_rule("", "v1", ("CREATE", "UPDATE"), ["events"])],
        f"request.userInfo.username == {cel_string(service_account_user(namespace, hooks_account))}",
        [{"name": "controllers", "expression": controllers_map(kinds)}],
        HOOKS_EVENT_VALIDATIONS,
    )
    return docs


def launcher_rbac_policies(*, prefix: str, metacontroller_user: str, labels: Mapping[str, str]) -> list[Json]:
    """Metacontroller's Role and RoleBinding writes held to MPI launchers' (only for a Metacontroller that
    serves trainop alone: another controller's Roles would be refused too)."""
    docs: list[Json] = []
    for resource, validations in LAUNCHER_RBAC_VALIDATIONS.items():
        docs += _policy(
            f"{prefix}-metacontroller-launcher-{resource}",
            labels,
            [_rule("rbac.authorization.k8s.io", "v1", ("CREATE", "UPDATE"), [resource])],
            f"request.userInfo.username == {cel_string(metacontroller_user)}",
            list(LAUNCHER_VARIABLES),
            validations,
        )
    return docs
