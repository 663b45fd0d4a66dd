"""The admission policies the install ships: the chart renders what manifests/ installs, per mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.install.test_manifests import CHART, MANIFESTS, kustomized, render
from trainop.install import manifests
from trainop.install import policies as policy_module
from trainop.jsontypes import Json

POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@pytest.fixture(scope="module")
def installed() -> list[Json]:
    return [d for d in kustomized(MANIFESTS) if d["kind"] in POLICY_KINDS]


def policies(docs: list[Json]) -> dict[str, Json]:
    return {
        d["metadata"]["name"]: d["spec"]
        for d in docs
        if d["kind"] in POLICY_KINDS and d["kind"] == POLICY_KINDS[0]
    }


def test_the_chart_renders_the_policies_manifests_install(
    helm: tuple[str, Path], installed: list[Json]
) -> None:
    assert policies(render(helm)) == policies(installed)


def test_manifests_install_the_four_policies_each_with_a_deny_binding(installed: list[Json]) -> None:
    names = {
        "trainop-webhooks-ca-bundle-only",
        "trainop-webhook-cert-writer",
        "trainop-hooks-events",
        "trainop-hooks-job-deletion",
    }
    assert set(policies(installed)) == names
    bindings = {d["metadata"]["name"]: d["spec"] for d in installed if d["kind"] == POLICY_KINDS[1]}
    assert bindings == {n: {"policyName": n, "validationActions": ["Deny"]} for n in names}


def test_with_cert_manager_no_policy_keeps_cert_manager_from_writing_the_secret(
    helm: tuple[str, Path],
) -> None:
    assert set(policies(render(helm, "certManager.enabled=true"))) == {
        "trainop-hooks-events",
        "trainop-hooks-job-deletion",
    }


def test_adopting_a_hand_made_secret_leaves_the_secret_writable(helm: tuple[str, Path]) -> None:
    assert "trainop-webhook-cert-writer" not in policies(render(helm, "webhooks.adoptCertSecret=true"))


def test_a_release_s_policies_name_its_own_service_accounts(helm: tuple[str, Path]) -> None:
    rendered = policies(render(helm, "fullnameOverride=ops"))
    caller = rendered["ops-hooks-events"]["matchConditions"][0]["expression"]
    assert caller == f'request.userInfo.username == "system:serviceaccount:{manifests.NAMESPACE}:ops-hooks"'
    [variable] = rendered["ops-webhooks-ca-bundle-only"]["variables"]
    assert variable == {"name": "configurations", "expression": '["ops-mutate", "ops-validate"]'}


def test_metacontroller_holds_no_secrets_and_no_namespaces() -> None:
    rules = yaml.safe_load((CHART / "values.yaml").read_text())["metacontroller"]["clusterRole"]["rules"]
    granted = {
        (group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]
    }
    assert not granted & {("", "secrets"), ("", "namespaces"), ("", "*"), ("*", "*")}


def launcher_policies(user: str) -> dict[str, Json]:
    return policies(
        policy_module.launcher_rbac_policies(
            prefix="trainop", metacontroller_user=user, labels=manifests.LABELS
        )
    )


def test_the_bundled_metacontroller_may_write_only_mpi_launchers_roles_and_bindings(
    helm: tuple[str, Path], installed: list[Json]
) -> None:
    rendered = policies(render(helm, "metacontroller.enabled=true"))
    extra = {k: v for k, v in rendered.items() if k not in policies(installed)}
    assert extra == launcher_policies(f"system:serviceaccount:{manifests.NAMESPACE}:trainop-metacontroller")


@pytest.mark.parametrize(
    ("setting", "account"),
    [
        ("metacontroller.fullnameOverride=mc", "mc"),
        ("metacontroller.serviceAccount.name=mc-sa", "mc-sa"),
        ("metacontroller.serviceAccount.create=false", "default"),
    ],
)
def test_the_launcher_policies_name_the_service_account_the_subchart_creates(
    helm: tuple[str, Path], setting: str, account: str
) -> None:
    rendered = policies(render(helm, "metacontroller.enabled=true", setting))
    caller = rendered["trainop-metacontroller-launcher-roles"]["matchConditions"][0]["expression"]
    assert caller == f'request.userInfo.username == "system:serviceaccount:{manifests.NAMESPACE}:{account}"'


def test_a_metacontroller_of_your_own_gets_no_launcher_policy(helm: tuple[str, Path]) -> None:
    """It may serve other controllers, whose Roles the policy would refuse."""
    assert not [name for name in policies(render(helm)) if "metacontroller" in name]


@pytest.mark.parametrize(
    "setting",
    ["networkPolicy.enabled=false", "metacontroller.enabled=true", "rbac.aggregateToUserRoles=false"],
)
def test_a_self_managed_certificate_always_comes_with_its_secret_policy(
    helm: tuple[str, Path], setting: str
) -> None:
    """The server's own check of the Secret can be copied: the policy is what it relies on."""
    assert "trainop-webhook-cert-writer" in policies(render(helm, setting))
