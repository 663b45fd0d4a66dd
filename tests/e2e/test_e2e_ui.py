"""The web UI on a real control plane, in Debian's chromium: `trainop ui --cluster --auth proxy`, every
request made as the user the proxy header names, so the apiserver's RBAC decides what each one sees.

Pods are kwok's (no logs); the jobs, their status, Events, the watch, impersonation, access reviews and
dry-run creates are the real apiserver's and Metacontroller's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect
from trainop_stack import Namespace, TrainopStack, job, kwok_annotations, replica
from ui_served import ADMIN, GROUP, as_user, served_ui

from tests.browser import artifacts_dir, launched


@pytest.fixture(scope="module")
def artifacts() -> Path:
    return artifacts_dir()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as b:
        yield b


@pytest.fixture(scope="module")
def ui(stack: TrainopStack) -> Iterator[str]:
    with served_ui(stack) as url:
        yield url


def pytorch(name: str, run_for: str | None = "6s") -> dict[str, Any]:
    outcome = "Succeeded" if run_for else None
    pods = kwok_annotations(outcome=outcome, run_for=run_for)
    return job("PyTorchJob", name, {
        "Master": replica("PyTorchJob", annotations=pods),
        "Worker": replica("PyTorchJob", replicas=2, annotations=pods),
    })  # fmt: skip


def test_the_list_shows_a_jobs_state_change_in_place_within_2_seconds(
    ui: str, browser: Browser, namespace: Namespace, artifacts: Path
) -> None:
    namespace.apply(pytorch("mnist", run_for="8s"))
    namespace.wait_for("pytorchjob/mnist", "Running")
    page = as_user(browser, ADMIN)
    page.goto(f"{ui}?namespace={namespace.name}")
    row = page.locator("table.jobs tbody tr", has_text="mnist")
    expect(row).to_contain_text("Running")
    page.screenshot(path=artifacts / "cluster-list.png", full_page=True)
    namespace.wait_for("pytorchjob/mnist", "Succeeded")
    expect(row.locator("td").nth(3)).to_contain_text("Succeeded", timeout=2000)
    expect(row.locator("td").nth(4)).to_contain_text("Worker 0/2/0")


def test_a_jobs_page_shows_its_own_pods_and_events_only(
    ui: str, browser: Browser, namespace: Namespace, artifacts: Path
) -> None:
    namespace.apply(pytorch("one", run_for=None))
    namespace.apply(pytorch("two", run_for=None))
    namespace.wait_for("pytorchjob/one", "Running")
    page = as_user(browser, ADMIN)
    page.goto(f"{ui}job/{namespace.name}/PyTorchJob/one")
    expect(page.locator("table.pods tbody tr")).to_have_count(3)
    expect(page.locator("table.pods")).not_to_contain_text("two-")
    expect(page.locator("table.events")).to_contain_text("SuccessfulCreatePod")
    expect(page.locator("svg.timeline")).to_be_visible()
    page.screenshot(path=artifacts / "cluster-job.png", full_page=True)


def test_suspend_resume_and_delete_are_confirmed_and_done_as_the_user(
    ui: str, browser: Browser, namespace: Namespace
) -> None:
    namespace.apply(pytorch("acted", run_for=None))
    namespace.wait_for("pytorchjob/acted", "Running")
    page = as_user(browser, ADMIN)
    page.goto(f"{ui}job/{namespace.name}/PyTorchJob/acted")
    page.on("dialog", lambda d: d.accept())
    page.click("button:has-text('Suspend')")
    expect(page.locator(".notice")).to_contain_text("suspended")
    namespace.wait_for("pytorchjob/acted", "Suspended")
    # A suspended job is offered Resume, not Suspend.
    page.reload()
    expect(page.locator("button:has-text('Suspend')")).to_have_count(0)
    page.click("button:has-text('Resume')")
    expect(page.locator(".notice")).to_contain_text("resumed")
    assert namespace.get("pytorchjob/acted")["spec"]["runPolicy"]["suspend"] is False
    page.click("button:has-text('Delete')")
    expect(page.locator(".notice")).to_contain_text("deleted")
    namespace.stack.wait_until("the job is gone", lambda: not namespace.exists("pytorchjob/acted"))


def test_a_delete_of_an_address_with_an_empty_job_name_is_a_404_and_every_job_stays(
    ui: str, browser: Browser, namespace: Namespace
) -> None:
    namespace.apply(pytorch("kept", run_for=None))
    namespace.wait_for("pytorchjob/kept", "Running")
    page = as_user(browser, ADMIN)
    page.goto(f"{ui}job/{namespace.name}/PyTorchJob/kept")
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    answer = page.request.post(
        f"{ui}action/delete/{namespace.name}/PyTorchJob/",
        form={"csrf": csrf or ""},
        headers={"Origin": ui.rstrip("/")},
    )
    assert answer.status == 404 and "the job name is empty" in answer.text()
    assert namespace.exists("pytorchjob/kept")


def test_the_wizard_creates_a_job_on_the_cluster(
    ui: str, browser: Browser, namespace: Namespace, artifacts: Path
) -> None:
    page = as_user(browser, ADMIN)
    page.goto(f"{ui}new?kind=PyTorchJob")
    page.fill("input[name=namespace]", namespace.name)
    page.fill("input[name=name]", "Bad_Name")
    expect(page.locator("#err-name")).to_contain_text("DNS-1035")
    page.fill("input[name=name]", "wizard-made")
    expect(page.locator("#err-name")).to_have_count(0)
    page.click("button[value=dry-run]")
    expect(page.locator(".verdict")).to_contain_text("the cluster accepts it (dry run)")
    assert not namespace.exists("pytorchjob/wizard-made")
    page.click("button[value=create]")
    expect(page.locator("h1")).to_contain_text("wizard-made")
    assert namespace.exists("pytorchjob/wizard-made")
    page.screenshot(path=artifacts / "cluster-wizard-created.png", full_page=True)


def test_a_user_who_may_list_only_namespace_a_sees_nothing_of_namespace_b(
    ui: str, browser: Browser, stack: TrainopStack, namespace: Namespace, artifacts: Path
) -> None:
    other = Namespace(stack, f"e2e-{uuid.uuid4().hex[:8]}")
    stack.cp.create_namespace(other.name)
    user = f"alice-{uuid.uuid4().hex[:6]}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader"},
        "rules": [
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
        ],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }  # fmt: skip
    namespace.apply(role)
    namespace.apply(binding)
    namespace.apply(pytorch("visible", run_for=None))
    other.apply(pytorch("hidden", run_for=None))
    namespace.wait_for("pytorchjob/visible", "Created")
    other.wait_for("pytorchjob/hidden", "Created")
    admin = as_user(browser, ADMIN)
    admin.goto(f"{ui}?namespace={other.name}")
    expect(admin.locator("table.jobs")).to_contain_text("hidden")
    page = as_user(browser, user)
    page.goto(f"{ui}?q=visible")
    expect(page.locator("table.jobs")).to_contain_text("visible")
    page.goto(ui)
    expect(page.locator("table.jobs")).not_to_contain_text("hidden")
    assert other.name not in page.locator("select[name=namespace]").inner_text()
    assert page.goto(f"{ui}job/{other.name}/PyTorchJob/hidden").status in (403, 404)
    page.goto(f"{ui}job/{namespace.name}/PyTorchJob/visible")
    # The UI is writable, but this user may not patch or delete: no write control is offered.
    expect(page.locator("h1")).to_contain_text("visible")
    expect(page.locator("div.actions button")).to_have_count(0)
    csrf = page.get_attribute("meta[name=csrf-token]", "content") or ""
    forged = page.request.post(f"{ui}action/delete/{namespace.name}/PyTorchJob/visible", form={"csrf": csrf})
    assert forged.status == 403
    assert namespace.exists("pytorchjob/visible")
    page.screenshot(path=artifacts / "cluster-rbac.png", full_page=True)
    page.goto(f"{ui}new?kind=PyTorchJob")
    page.fill("input[name=namespace]", namespace.name)
    refused = f"You may not create PyTorchJobs in namespace {namespace.name}"
    expect(page.locator("#buttons")).to_contain_text(refused)
    expect(page.locator("button[value=create]")).to_have_count(0)
    page.screenshot(path=artifacts / "cluster-wizard-read-only.png", full_page=True)
    stack.kubectl("delete", "namespace", other.name, "--wait=false", check=False)


def test_a_user_whose_access_comes_through_their_second_group_sees_and_opens_the_job(
    ui: str, browser: Browser, namespace: Namespace, artifacts: Path
) -> None:
    user, group = f"bob-{uuid.uuid4().hex[:6]}", GROUP
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "group-reader"},
        "rules": [
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
        ],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "group-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "group-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }  # fmt: skip
    namespace.apply(role)
    namespace.apply(binding)
    namespace.apply(pytorch("by-group", run_for=None))
    namespace.wait_for("pytorchjob/by-group", "Created")
    without = as_user(browser, user, ("unrelated",))
    assert without.goto(f"{ui}job/{namespace.name}/PyTorchJob/by-group").status in (403, 404)
    page = as_user(browser, user, ("unrelated", group))
    page.goto(f"{ui}?namespace={namespace.name}")
    expect(page.locator("table.jobs")).to_contain_text("by-group")
    assert page.goto(f"{ui}job/{namespace.name}/PyTorchJob/by-group").status == 200
    expect(page.locator("h1")).to_contain_text("by-group")
    page.screenshot(path=artifacts / "cluster-second-group.png", full_page=True)
