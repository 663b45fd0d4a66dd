"""What the web UI's ServiceAccount may impersonate, as the chart installs it in proxy mode, on a real
apiserver: any user, but groups only by the names ui.auth.impersonateGroups lists, so never
system:masters, and no service account (docs/security.md#the-web-ui).

A control plane of its own with `helm install` of the chart (the UI in proxy mode, one group named);
no server runs: each question is asked as the ServiceAccount (`kubectl auth can-i --as=...`), and the
attack is made with the ServiceAccount's own token, as a UI whose proxy header was forged would make it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chart import Release, packaged_chart
from controlplane import ControlPlane, default_bin_dir

pytestmark = pytest.mark.e2e

RELEASE, NAMESPACE = "trainop", "trainop-system"
UI_SA = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-ui"
GROUP = "ml-team"
PROXY_MODE = [
    "ui.enabled=true",
    "ui.auth.mode=proxy",
    "ui.auth.groupsHeader=X-Forwarded-Groups",
    f"ui.auth.impersonateGroups[0]={GROUP}",
    "ui.auth.proxySecret.name=ui-proxy",
    "ui.networkPolicy.from[0].podSelector.matchLabels.app=auth-proxy",
]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    cp = ControlPlane(default_bin_dir(), tmp_path_factory.mktemp("ui-rbac-cp"))
    try:
        cp.start()
        rel = Release(cp, packaged_chart(tmp_path_factory.mktemp("chart")), RELEASE, NAMESPACE)
        # No server runs and none needs to: the RBAC objects are what is under test.
        rel.install(PROXY_MODE, wait=False)
        yield rel
    finally:
        cp.stop()


def can_i(release: Release, *question: str) -> str:
    answer = release.kubectl("auth", "can-i", *question, f"--as={UI_SA}", check=False)
    return answer.stdout.strip()


def test_the_ui_service_account_cannot_impersonate_system_masters(release: Release) -> None:
    assert can_i(release, "impersonate", "groups/system:masters") == "no"


def test_the_ui_service_account_may_impersonate_the_named_group_and_no_other(release: Release) -> None:
    assert can_i(release, "impersonate", f"groups/{GROUP}") == "yes"
    assert can_i(release, "impersonate", "groups/ops") == "no"
    assert can_i(release, "impersonate", "groups") == "no"


def test_the_ui_service_account_may_impersonate_users(release: Release) -> None:
    assert can_i(release, "impersonate", "users/alice") == "yes"


def test_the_ui_service_account_cannot_impersonate_a_service_account(release: Release) -> None:
    assert can_i(release, "impersonate", "serviceaccounts/default", "-n", "kube-system") == "no"


def as_the_ui(release: Release, *impersonation: str) -> str:
    """What the apiserver answers a `get secrets -n kube-system` made with the UI's own token as the
    `impersonation` flags say: the error, naming whom it refused."""
    kubeconfig = release.token_kubeconfig(f"{RELEASE}-ui")
    answer = release.kubectl(
        f"--kubeconfig={kubeconfig}", *impersonation, "get", "secrets", "-n", "kube-system", check=False
    )
    assert answer.returncode != 0, answer.stdout
    return answer.stderr


# An apiserver refuses the impersonation itself by naming the UI's ServiceAccount ("cannot impersonate
# ..."; with constrained impersonation, "cannot impersonate-on:..."); one that allowed it names the user
# it then acted as, who lacks the grant.
REFUSED_TO_THE_UI = f'User "{UI_SA}" cannot impersonate'


def test_with_the_uis_token_a_request_as_system_masters_is_refused(release: Release) -> None:
    assert REFUSED_TO_THE_UI in as_the_ui(release, "--as=alice", "--as-group=system:masters")


def test_with_the_uis_token_a_request_as_a_service_account_is_refused(release: Release) -> None:
    assert REFUSED_TO_THE_UI in as_the_ui(release, "--as=system:serviceaccount:kube-system:default")


def test_with_the_uis_token_a_request_as_a_user_in_the_named_group_is_made_as_that_user(
    release: Release,
) -> None:
    error = as_the_ui(release, "--as=alice", f"--as-group={GROUP}")
    assert 'User "alice" cannot list resource "secrets"' in error, error
