"""The job page's "why pending" on a control plane whose real kube-scheduler gang-schedules
(scheduling.k8s.io/v1alpha2 PodGroups), in Debian's chromium, as proxy-authenticated users.

The gang (tests/e2e/gang.py) is four pods of which the one kwok node has room for three, so the
scheduler binds none of them: the PodGroup's condition and the pods' FailedScheduling Events are
the real scheduler's. A second node makes room, and the open page follows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gang import API, gang_job, gang_stack
from playwright.sync_api import Browser, Locator, Page, expect
from trainop_stack import Namespace, TrainopStack, scratch_namespace
from ui_served import as_user, served_ui

from tests.browser import artifacts_dir, launched

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# The job page re-reads its parts once a second (docs/ui.md); one more second for the round trip.
UPDATE_MS = 2000


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    with gang_stack(tmp_path_factory.mktemp("e2e-ui-pending")) as started:
        # The installed roles: trainop-view adds the jobs to the cluster's `view` role.
        docs = yaml.safe_load_all((REPO / "manifests" / "rbac-jobs.yaml").read_text())
        for doc in docs:
            if doc and doc["metadata"]["name"] == "trainop-view":
                started.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
        yield started


@pytest.fixture(scope="module")
def ui(stack: TrainopStack) -> Iterator[str]:
    with served_ui(stack) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as b:
        yield b


@pytest.fixture
def ns(stack: TrainopStack) -> Iterator[Namespace]:
    with scratch_namespace(stack, "pending") as namespace:
        yield namespace


@pytest.fixture
def room(stack: TrainopStack) -> Iterator[str]:
    """The name of a second node that the test may add; it is removed afterwards, so the next test's
    gang again finds room for three pods only."""
    name = f"kwok-{uuid.uuid4().hex[:6]}"
    yield name
    stack.kubectl("delete", "node", name, "--ignore-not-found", check=False)


def role_binding(name: str, kind: str, role: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }  # fmt: skip


def viewer(ns: Namespace) -> str:
    """A user bound to the cluster's `view` role in the namespace, which (with the gates on) reads
    PodGroups and (with trainop's roles installed) PyTorchJobs."""
    user = f"viewer-{uuid.uuid4().hex[:6]}"
    ns.apply(role_binding("viewer", "ClusterRole", "view", user))
    ns.wait_until("the view role to cover the jobs", lambda: can(ns, user, "get", "pytorchjobs"))
    return user


def job_reader(ns: Namespace) -> str:
    """A user who may read the jobs, their pods and Events, but not PodGroups."""
    user = f"reader-{uuid.uuid4().hex[:6]}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "job-reader"},
        "rules": [
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
        ],
    }  # fmt: skip
    ns.apply(role)
    ns.apply(role_binding("job-reader", "Role", "job-reader", user))
    return user


def can(ns: Namespace, user: str, verb: str, resource: str) -> bool:
    answer = ns.kubectl("auth", "can-i", verb, resource, f"--as={user}", check=False).stdout.strip()
    return answer == "yes"


def pod_group_condition(ns: Namespace, name: str) -> dict[str, Any] | None:
    conditions = ns.get(f"podgroups.scheduling.k8s.io/{name}").get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "PodGroupScheduled"), None)


def pods(ns: Namespace, name: str) -> list[dict[str, Any]]:
    return ns.items("pods", f"training.kubeflow.org/job-name={name}")


def scheduling_messages(ns: Namespace) -> dict[str, str]:
    """Each pod's latest FailedScheduling message."""
    events = [e for e in ns.items("events") if e.get("reason") == "FailedScheduling"]
    events.sort(key=lambda e: (e.get("series") or {}).get("lastObservedTime") or e.get("eventTime") or "")
    return {e["involvedObject"]["name"]: e.get("message", "") for e in events}


def pod_row(page: Page, pod: str) -> Locator:
    """The pods table's row of `pod` of the job `waits` (the table names it by replica and index)."""
    return page.locator("table.pods tbody tr").filter(
        has=page.locator("td:nth-child(2)", has_text=pod.removeprefix("waits-"))
    )


def create_unfitting_gang(ns: Namespace) -> dict[str, Any]:
    """The job `waits`, once the scheduler has written why it cannot place it; its PodGroupScheduled
    condition as the scheduler wrote it."""
    ns.create(gang_job("waits"))
    ns.wait_until("four pods of the job", lambda: len(pods(ns, "waits")) == 4)
    ns.wait_until(
        "the scheduler to give up on the gang",
        lambda: bool(pod_group_condition(ns, "waits")) and len(scheduling_messages(ns)) == 4,
        timeout=120,
    )
    condition = pod_group_condition(ns, "waits")
    assert condition is not None
    return condition


def test_a_viewer_sees_the_pod_group_and_why_the_gangs_pods_wait_then_them_scheduled_live(
    ui: str, browser: Browser, stack: TrainopStack, ns: Namespace, room: str
) -> None:
    user = viewer(ns)
    condition = create_unfitting_gang(ns)
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    page = as_user(browser, user)
    page.goto(f"{ui}job/{ns.name}/PyTorchJob/waits")

    gate = page.locator("#scheduling")
    expect(gate).to_contain_text("PodGroup")
    expect(gate).to_contain_text(API)
    expect(gate.locator(".gate .state")).to_have_text("Unschedulable")
    expect(gate).to_contain_text("minCount4")
    expect(gate).to_contain_text("members4 pods, 0 bound to a node")
    expect(gate).to_contain_text(f"PodGroupScheduledFalse (Unschedulable): {condition['message']}")
    # Each pod's own reason, as the scheduler's Events give it: the one that finds no room, the
    # others waiting for their gang.
    said = scheduling_messages(ns)
    assert any("Insufficient cpu" in message for message in said.values())
    for name, message in sorted(said.items()):
        expect(pod_row(page, name).locator("td").nth(6)).to_contain_text(message)
    page.screenshot(path=artifacts_dir() / "cluster-pending.png", full_page=True)

    stack.cp.create_node(room)
    ns.wait_until(
        "every pod of the gang bound and running",
        lambda: all(
            p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods(ns, "waits")
        ),
        timeout=120,
    )
    phases = page.locator("table.pods tbody tr td:nth-child(4)")
    expect(phases).to_have_text(["Running"] * 4, timeout=UPDATE_MS)
    nodes = page.locator("table.pods tbody tr td:nth-child(3)")
    expect(nodes).to_have_text(
        [pod["spec"]["nodeName"] for pod in sorted(pods(ns, "waits"), key=lambda p: p["metadata"]["name"])],
        timeout=UPDATE_MS,
    )
    expect(gate).to_have_count(0)
    page.screenshot(path=artifacts_dir() / "cluster-pending-scheduled.png", full_page=True)


def test_a_user_who_may_not_read_pod_groups_gets_a_note_not_an_error(
    ui: str, browser: Browser, ns: Namespace
) -> None:
    user = job_reader(ns)
    create_unfitting_gang(ns)
    page = as_user(browser, user)
    response = page.goto(f"{ui}job/{ns.name}/PyTorchJob/waits")
    assert response is not None and response.status == 200
    expect(page.locator("p.notice.warning")).to_have_text(
        f"you may not read PodGroups ({API}) in this namespace"
    )
    expect(page.locator("#scheduling")).to_have_count(0)
    for name, message in sorted(scheduling_messages(ns).items()):
        expect(pod_row(page, name).locator("td").nth(6)).to_contain_text(message)
