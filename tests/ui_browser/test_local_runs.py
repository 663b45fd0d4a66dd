"""The web UI over `trainop run`'s runs, in a real browser: list, filter, a job's page, live updates,
logs, the wizard, and the actions."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.local.helpers import behave, eventually
from tests.local.runs import REPO, start
from tests.ui_browser.conftest import Serve
from tests.ui_browser.helpers import finished_run, job_file, live_run, python, record, state

# Prints a line, waits until the gate file exists, prints another.
WAIT_FOR = (
    "import pathlib,sys,time\n"
    "print('{name} before', flush=True)\n"
    "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"
    "print('{name} after', flush=True)"
)


def waiting(name: str, gate: Path) -> list[str]:
    return [*python(WAIT_FOR.format(name=name)), str(gate)]


def test_a_finished_run_is_listed_with_its_state_and_replica_counts(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "mnist", behave("--print", "hi from a worker"))
    page.goto(serve())
    row = page.locator("table.jobs tbody tr", has_text="mnist")
    expect(row).to_contain_text("Succeeded")
    expect(row.locator("td").nth(4)).to_contain_text("Worker 0/2/0")
    page.screenshot(path=artifacts / "list.png", full_page=True)


def test_the_list_is_readable_in_the_dark_theme(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "mnist", behave())
    page.emulate_media(color_scheme="dark")
    page.goto(serve())
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(13, 17, 23)"
    page.screenshot(path=artifacts / "list-dark.png", full_page=True)


def test_filtering_by_state_keeps_only_matching_runs_and_puts_the_filter_in_the_url(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "good", behave())
    finished_run(runs, "bad", behave("--exit", "3"), workers=1, master=behave("--exit", "3"))
    page.goto(serve())
    expect(page.locator("table.jobs tbody tr")).to_have_count(2)
    page.select_option("select[name=state]", "Failed")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    expect(page.locator("table.jobs tbody tr")).to_contain_text("bad")
    assert "state=Failed" in page.url
    page.screenshot(path=artifacts / "list-filtered.png", full_page=True)


def test_a_state_change_updates_the_row_in_place_within_2_seconds(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    gate = runs.parent / "gate"
    finished_run(runs, "earlier", behave())
    proc, workdir = live_run(runs, "live", waiting("w", gate))
    page.goto(serve())
    row = page.locator("table.jobs tbody tr", has_text="live")
    expect(row).to_contain_text("Running")
    order = page.locator("table.jobs tbody tr").evaluate_all("rows => rows.map(r => r.id)")
    page.evaluate("document.querySelector('table.jobs tbody tr[data-key=live]').dataset.marker = 'same'")
    gate.touch()
    assert eventually(lambda: state(workdir) == "Succeeded")
    expect(row.locator("td").nth(3)).to_contain_text("Succeeded", timeout=2000)
    assert page.locator("table.jobs tbody tr").evaluate_all("rows => rows.map(r => r.id)") == order
    assert (
        page.evaluate("document.querySelector('table.jobs tbody tr[data-key=live]').dataset.marker") == "same"
    )
    page.screenshot(path=artifacts / "list-live.png", full_page=True)
    assert proc.wait(timeout=60) == 0


def test_a_jobs_page_shows_its_timeline_pods_events_and_merged_logs(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "mnist", behave("--print", "hi from a worker"))
    page.goto(serve())
    page.click("text=mnist")
    expect(page.locator("h1")).to_contain_text("PyTorchJob")
    expect(page.locator("svg.timeline")).to_be_visible()
    expect(page.locator("table.pods tbody tr")).to_have_count(3)
    expect(page.locator("table.pods")).to_contain_text("worker-1")
    expect(page.locator("pre.log")).to_contain_text("[worker-1] hi from a worker")
    expect(page.locator("pre.log")).to_contain_text("[master-0] mnist master says hello")
    expect(page.locator("table.events")).to_contain_text("job Succeeded")
    page.screenshot(path=artifacts / "job.png", full_page=True)


def test_one_pods_log_is_shown_without_the_others(page: Page, serve: Serve, runs: Path) -> None:
    finished_run(runs, "mnist", behave("--print", "hi from a worker"))
    page.goto(serve() + "job/mnist")
    page.click("nav.logpick >> text=master-0/pytorch")
    expect(page.locator("pre.log")).to_have_text("mnist master says hello\n")


def test_a_live_runs_log_is_followed(page: Page, serve: Serve, runs: Path, artifacts: Path) -> None:
    gate = runs.parent / "gate"
    proc, _ = live_run(runs, "live", waiting("w", gate))
    page.goto(serve() + "job/live")
    log = page.locator("pre.log")
    expect(log).to_contain_text("[worker-0] w before")
    gate.touch()
    expect(log).to_contain_text("[worker-1] w after")
    expect(page.locator("[data-part=status]")).to_contain_text("Succeeded")
    page.screenshot(path=artifacts / "job-live.png", full_page=True)
    assert proc.wait(timeout=60) == 0


def test_the_wizard_names_the_field_of_an_invalid_value_and_starts_a_valid_job(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    page.goto(serve("--writable") + "new")
    page.select_option("select[name=kind]", "PyTorchJob")
    expect(page.locator("fieldset.replica legend").first).to_contain_text("Master")
    page.fill("input[name=namespace]", "team-a")
    page.fill("input[name=name]", "Bad_Name")
    error = page.locator("#err-name")
    expect(error).to_contain_text("DNS-1035")
    # A check's answer never rewrites an input: what was typed meanwhile stays.
    expect(page.locator("input[name=namespace]")).to_have_value("team-a")
    expect(page.locator("input[name=name]")).to_have_value("Bad_Name")
    expect(page.locator("button[value=create]")).to_be_disabled()
    page.screenshot(path=artifacts / "wizard-invalid.png", full_page=True)
    page.fill("input[name=name]", "from-the-wizard")
    expect(error).to_have_count(0)
    page.fill("input[name='Worker.command']", "python3 -c \"print('made by the wizard')\"")
    expect(page.locator("#wizard-yaml")).to_contain_text("made by the wizard")
    page.screenshot(path=artifacts / "wizard.png", full_page=True)
    page.click("button[value=create]")
    expect(page.locator("h1")).to_contain_text("from-the-wizard")
    expect(page.locator("[data-part=status]")).to_contain_text("Succeeded", timeout=60_000)
    expect(page.locator("pre.log")).to_contain_text("[worker-0] made by the wizard")


def test_stopping_a_run_asks_first_and_then_stops_it(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    gate = runs.parent / "never"
    proc, workdir = live_run(runs, "live", waiting("w", gate))
    page.goto(serve("--writable") + "job/live")
    page.once("dialog", lambda d: d.dismiss())
    page.click("button:has-text('Stop')")
    assert proc.poll() is None
    page.once("dialog", lambda d: d.accept())
    page.click("button:has-text('Stop')")
    expect(page.locator(".notice")).to_contain_text("stopping live")
    assert proc.wait(timeout=60) != 0
    assert "interrupted" in record(workdir)["finished"]["reason"]
    page.screenshot(path=artifacts / "job-stopped.png", full_page=True)


def test_deleting_a_finished_run_asks_first_and_removes_it(page: Page, serve: Serve, runs: Path) -> None:
    workdir = finished_run(runs, "old", behave())
    page.goto(serve("--writable") + "job/old")
    page.once("dialog", lambda d: d.accept())
    page.click("button:has-text('Delete')")
    expect(page.locator(".notice")).to_contain_text("deleted the run folder")
    expect(page.locator("table.jobs")).not_to_contain_text("old")
    assert not workdir.exists()


def test_a_read_only_ui_offers_no_actions_and_refuses_a_forged_write(
    page: Page, serve: Serve, runs: Path
) -> None:
    workdir = finished_run(runs, "old", behave())
    url = serve()
    page.goto(url + "job/old")
    expect(page.locator("div.actions")).to_have_count(0)
    csrf = page.get_attribute("meta[name=csrf-token]", "content")
    answer = page.request.post(url + "action/delete/old", form={"csrf": csrf or ""})
    assert answer.status == 403
    assert workdir.exists()


def test_trainop_run_with_ui_prints_a_url_that_shows_the_live_run(
    page: Page, runs: Path, artifacts: Path
) -> None:
    gate = runs.parent / "gate"
    manifest = job_file(
        runs.parent / "jobs" / "served", "served", waiting("w", gate), master=waiting("m", gate)
    )
    proc = start(str(manifest), "--workdir", str(runs / "served"), "--ui")
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "web UI at http://127.0.0.1:" in line and "/?token=" in line, line
    assert eventually(lambda: state(runs / "served") == "Running")
    page.goto(line.split(" at ", 1)[1].split()[0])
    expect(page.locator("table.jobs tbody tr", has_text="served")).to_contain_text("Running")
    page.click("text=served")
    expect(page.locator("pre.log")).to_contain_text("[worker-1] w before")
    page.screenshot(path=artifacts / "run-ui.png", full_page=True)
    gate.touch()
    assert proc.wait(timeout=60) == 0


def test_the_wizard_starts_from_an_example_and_its_configmap_goes_with_the_run(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    page.goto(serve("--writable") + "new")
    page.select_option("select[name=kind]", "PyTorchJob")
    page.click("text=Start from example: pytorch")
    expect(page.locator("input[name='Worker.image']")).to_have_value("trainop-examples/pytorch:latest")
    expect(page.locator("#companions-note")).to_contain_text("pytorch-dist-digits-script")
    expect(page.locator("#verdict")).to_contain_text("Valid")
    page.screenshot(path=artifacts / "wizard-example.png", full_page=True)
    # The script arrives through the example's ConfigMap: the replicas print its first line.
    first_line = 'python3 -c "import sys; print(open(sys.argv[1]).readline())" /example/train.py'
    page.fill("input[name=name]", "from-an-example")
    page.fill("input[name='Master.command']", first_line)
    page.fill("input[name='Worker.command']", first_line)
    expect(page.locator("#wizard-yaml")).to_contain_text("/example/train.py")
    expect(page.locator("#wizard-yaml")).to_contain_text("ACCURACY_TARGET")
    page.click("button[value=create]")
    expect(page.locator("h1")).to_contain_text("from-an-example")
    expect(page.locator("[data-part=status]")).to_contain_text("Succeeded", timeout=60_000)
    script = (REPO / "trainop" / "examples" / "pytorch" / "train.py").read_text()
    expect(page.locator("pre.log")).to_contain_text(f"[worker-1] {script.splitlines()[0]}")


def luminance(rgb: str) -> float:
    """Relative luminance (WCAG) of a computed `rgb(r, g, b)` colour."""
    channels = [int(c) / 255 for c in rgb.removeprefix("rgb(").removesuffix(")").split(",")[:3]]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(page: Page, selector: str) -> float:
    """The WCAG contrast ratio of an element's text against the page's background."""
    fg = page.locator(selector).first.evaluate("e => getComputedStyle(e).color")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    light, dark = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_a_jobs_page_and_the_wizard_are_readable_in_the_dark_theme(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "mnist", behave("--print", "hi from a worker"))
    page.emulate_media(color_scheme="dark")
    url = serve()
    page.goto(url + "job/mnist")
    expect(page.locator("svg.timeline")).to_be_visible()
    # WCAG AA asks 4.5:1 for body text.
    assert contrast(page, "pre.log") >= 4.5 and contrast(page, "table.pods td") >= 4.5
    page.screenshot(path=artifacts / "job-dark.png", full_page=True)
    page.goto(url + "new")
    assert contrast(page, "label.field") >= 4.5
    page.screenshot(path=artifacts / "wizard-dark.png", full_page=True)


def test_the_list_and_a_jobs_page_are_usable_with_the_keyboard_alone(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    finished_run(runs, "good", behave())
    finished_run(runs, "bad", behave("--exit", "3"), workers=1, master=behave("--exit", "3"))
    page.goto(serve())
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.url.endswith("#main")
    page.focus("input[name=q]")
    page.keyboard.type("bad")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    # From the search box, Tab walks forward to the one row's link, and Enter opens the job.
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.closest('table.jobs') !== null"):
            break
    assert page.evaluate("document.activeElement.textContent") == "bad"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", "the focused link shows no focus ring"
    page.screenshot(path=artifacts / "list-keyboard.png", full_page=True)
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text("bad")
    page.focus("nav.logpick a >> nth=1")
    page.keyboard.press("Enter")
    expect(page.locator("nav.logpick a[aria-current=true]")).not_to_contain_text("all, merged")


def test_a_runs_recorded_tensorboard_is_linked_from_its_row_and_its_page(
    page: Page, serve: Serve, runs: Path, artifacts: Path
) -> None:
    workdir = finished_run(runs, "boarded", behave())
    data = record(workdir)
    # What `trainop run --tensorboard` records at the top of run.json.
    data["tensorboard"] = {"url": "http://127.0.0.1:6006/"}
    (workdir / "run.json").write_text(json.dumps(data))
    url = serve()
    page.goto(url)
    link = page.locator("table.jobs tbody tr", has_text="boarded").get_by_role("link", name="TensorBoard")
    expect(link).to_have_attribute("href", "http://127.0.0.1:6006/")
    page.screenshot(path=artifacts / "list-tensorboard.png", full_page=True)
    page.goto(url + "job/boarded")
    expect(page.locator("p.links").get_by_role("link", name="TensorBoard")).to_have_attribute(
        "href", "http://127.0.0.1:6006/"
    )


def test_the_wizard_copies_the_kubectl_apply_line_of_the_file_it_downloads(
    page: Page, serve: Serve, runs: Path
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(serve() + "new?kind=PyTorchJob")
    page.fill("input[name=name]", "copied-job")
    expect(page.locator("#apply-command")).to_have_text("kubectl apply -f copied-job.yaml")
    page.click("button[data-copy=apply-command]")
    expect(page.locator("button[data-copy=apply-command]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "kubectl apply -f copied-job.yaml"
