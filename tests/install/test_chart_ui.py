"""The chart's optional web UI Deployment (`ui.enabled`): what it runs, what it may do, who may reach it."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.install.test_manifests import (
    MANIFESTS,
    helm_template,
    load_all,
    one,
    pod_spec,
    render,
    without_labels,
)
from trainop.frameworks import KINDS
from trainop.ui.links import load_links

# The release and chart are both "trainop" (helm_template), so the UI's objects are "trainop-ui".
UI = "trainop-ui"


def test_the_ui_is_not_installed_by_default(helm: tuple[str, Path]) -> None:
    rendered = render(helm)
    assert not [d for d in rendered if d["metadata"]["name"] == UI]


def test_the_ui_serves_the_cluster_read_only_behind_the_proxy_by_default(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "ui.enabled=true")
    command = pod_spec(rendered, UI)["containers"][0]["command"]
    assert command[:3] == ["trainop", "ui", "--cluster"]
    assert "--auth=proxy" in command and "--writable" not in command
    assert one(rendered, "Service", UI)["spec"]["ports"][0]["port"] == 80
    assert one(rendered, "NetworkPolicy", UI)["spec"]["ingress"][0]["ports"] == [{"port": "http"}]


def test_the_uis_own_access_is_reading_jobs_and_impersonating_in_proxy_mode(helm: tuple[str, Path]) -> None:
    rules = one(render(helm, "ui.enabled=true"), "ClusterRole", UI)["rules"]
    assert (rules[0]["apiGroups"], rules[0]["verbs"]) == (["kubeflow.org"], ["get", "list", "watch"])
    assert sorted(rules[0]["resources"]) == sorted(info.plural for info in KINDS.values())
    assert rules[1] == {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}
    assert len(rules) == 2


def test_in_token_mode_the_ui_reviews_tokens_and_impersonates_no_one(helm: tuple[str, Path]) -> None:
    rules = one(render(helm, "ui.enabled=true", "ui.auth.mode=token"), "ClusterRole", UI)["rules"]
    assert rules[1] == {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    }
    assert not [r for r in rules if "impersonate" in r["verbs"]]


def test_links_and_writes_are_passed_to_the_ui(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "ui.enabled=true", "ui.writable=true", "ui.links[0].name=Grafana",
                      "ui.links[0].url=https://grafana/d/x?var-job=${metadata.name}")  # fmt: skip
    command = pod_spec(rendered, UI)["containers"][0]["command"]
    assert "--writable" in command and "--links=/etc/trainop-ui/links.yaml" in command
    assert "var-job=${metadata.name}" in one(rendered, "ConfigMap", f"{UI}-links")["data"]["links.yaml"]


def test_the_ui_links_tensorboard_under_its_path_prefix_unless_told_another_url(
    helm: tuple[str, Path],
) -> None:
    default = pod_spec(render(helm, "ui.enabled=true"), UI)["containers"][0]["command"]
    assert "--tensorboard-url=/tensorboard/${metadata.namespace}/${metadata.name}/" in default
    rendered = render(helm, "ui.enabled=true", "ui.tensorboardUrl=https://tb/${metadata.name}")
    command = pod_spec(rendered, UI)["containers"][0]["command"]
    assert "--tensorboard-url=https://tb/${metadata.name}" in command


def test_the_chart_refuses_a_ui_without_sign_in(helm: tuple[str, Path]) -> None:
    result = helm_template(helm, "ui.enabled=true", "ui.auth.mode=none")
    assert result.returncode != 0
    assert "ui.auth.mode must be proxy or token" in result.stderr


def test_the_kustomize_component_installs_what_the_chart_renders(helm: tuple[str, Path]) -> None:
    chart = {
        (d["kind"], d["metadata"]["name"]): d
        for d in render(helm, "ui.enabled=true")
        if UI in d["metadata"]["name"]
    }
    component = yaml.safe_load((MANIFESTS / "ui" / "kustomization.yaml").read_text())
    mine = {
        (d["kind"], d["metadata"]["name"]): d
        for f in component["resources"]
        for d in load_all(MANIFESTS / "ui" / f)
    }
    assert sorted(mine) == sorted(chart)
    for key, doc in mine.items():
        theirs = chart[key]
        if key[0] == "Deployment":
            a, b = doc["spec"]["template"]["spec"], theirs["spec"]["template"]["spec"]
            assert {**a, "containers": None} == {**b, "containers": None}
            assert {**a["containers"][0], "image": None} == {**b["containers"][0], "image": None}
        elif key[0] in ("Service", "NetworkPolicy"):
            assert {k: v for k, v in doc["spec"].items() if k not in ("selector", "podSelector")} == {
                k: v for k, v in theirs["spec"].items() if k not in ("selector", "podSelector")
            }
        else:
            assert without_labels(doc) == without_labels(theirs)


def values_links_example() -> str:
    """The commented `ui.links` example of values.yaml, uncommented."""
    text = (Path(__file__).resolve().parents[2] / "charts" / "trainop" / "values.yaml").read_text()
    block = text.split("# example:start\n", 1)[1].split("# example:end", 1)[0]
    return "\n".join(line.strip().removeprefix("# ") for line in block.splitlines())


def test_the_values_grafana_example_links_the_job_pre_selected(tmp_path: Path) -> None:
    links = tmp_path / "links.yaml"
    links.write_text(values_links_example())
    by_scope = {link.scope: link for link in load_links(links)}
    assert sorted(by_scope) == ["job", "pod", "replica"]
    job = {"metadata": {"namespace": "team-a", "name": "mnist"}}
    assert "var-namespace=team-a&var-job=mnist&" in by_scope["job"].expand(job)
    pod = {"metadata": {"namespace": "team-a", "name": "mnist-worker-0"}, "job": job}
    assert "var-pod=mnist-worker-0" in by_scope["pod"].expand(pod)
    replica = {**job, "replica": {"type": "Worker"}}
    assert "var-job=mnist&var-replica=Worker" in by_scope["replica"].expand(replica)
