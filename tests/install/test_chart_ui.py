"""The chart's optional web UI Deployment (`ui.enabled`): what it runs, what it may do, who may reach it."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_the_ui_serves_the_cluster_read_only_with_token_sign_in_by_default(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "ui.enabled=true")
    command = pod_spec(rendered, UI)["containers"][0]["command"]
    assert command[:3] == ["trainop", "ui", "--cluster"]
    assert "--auth=token" in command and "--writable" not in command and "--secure-cookies" in command
    assert one(rendered, "Service", UI)["spec"]["ports"][0]["port"] == 80
    assert one(rendered, "NetworkPolicy", UI)["spec"]["ingress"][0]["ports"] == [{"port": "http"}]


def test_by_default_the_ui_reviews_tokens_and_impersonates_no_one(helm: tuple[str, Path]) -> None:
    rules = one(render(helm, "ui.enabled=true"), "ClusterRole", UI)["rules"]
    assert (rules[0]["apiGroups"], rules[0]["verbs"]) == (["kubeflow.org"], ["get", "list", "watch"])
    assert sorted(rules[0]["resources"]) == sorted(info.plural for info in KINDS.values())
    assert rules[1] == {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["tokenreviews"],
        "verbs": ["create"],
    }
    assert len(rules) == 2


# Proxy mode as docs/ui.md says to configure it: only the proxy's pods reach the UI, and they prove
# themselves with the secret they share with it.
PROXY = (
    "ui.enabled=true",
    "ui.auth.mode=proxy",
    "ui.networkPolicy.from[0].podSelector.matchLabels.app=auth-proxy",
    "ui.auth.proxySecret.name=ui-proxy",
)


def test_proxy_mode_without_a_proxy_source_fails_to_render_naming_the_value(helm: tuple[str, Path]) -> None:
    result = helm_template(helm, "ui.enabled=true", "ui.auth.mode=proxy", "ui.auth.proxySecret.name=ui-proxy")
    assert result.returncode != 0
    assert "ui.auth.mode=proxy needs networkPolicy.enabled=true and ui.networkPolicy.from" in result.stderr


def test_proxy_mode_without_network_policies_fails_to_render(helm: tuple[str, Path]) -> None:
    result = helm_template(helm, *PROXY, "networkPolicy.enabled=false")
    assert result.returncode != 0
    assert "ui.auth.mode=proxy needs networkPolicy.enabled=true" in result.stderr


def test_proxy_mode_without_the_shared_secret_fails_to_render_naming_the_value(
    helm: tuple[str, Path],
) -> None:
    result = helm_template(helm, *PROXY, "ui.auth.proxySecret.name=")
    assert result.returncode != 0
    assert "ui.auth.mode=proxy needs ui.auth.proxySecret.name" in result.stderr


def test_in_proxy_mode_the_ui_gets_the_proxys_secret_from_the_named_secret(helm: tuple[str, Path]) -> None:
    (container,) = pod_spec(render(helm, *PROXY), UI)["containers"]
    assert "--auth=proxy" in container["command"]
    assert "--proxy-secret-header=X-Trainop-Proxy-Secret" in container["command"]
    (secret,) = [e for e in container["env"] if e["name"] == "TRAINOP_UI_PROXY_SECRET"]
    assert secret["valueFrom"] == {"secretKeyRef": {"name": "ui-proxy", "key": "secret"}}


def test_in_proxy_mode_only_the_proxy_may_reach_the_ui(helm: tuple[str, Path]) -> None:
    (rule,) = one(render(helm, *PROXY), "NetworkPolicy", UI)["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app": "auth-proxy"}}}]


def test_in_proxy_mode_the_ui_impersonates_users_and_no_group_unless_named(helm: tuple[str, Path]) -> None:
    rules = one(render(helm, *PROXY), "ClusterRole", UI)["rules"]
    assert [r for r in rules if "impersonate" in r["verbs"]] == [
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}
    ]
    assert not [r for r in rules if "tokenreviews" in r["resources"]]


def test_the_groups_the_ui_may_impersonate_are_exactly_the_named_ones(helm: tuple[str, Path]) -> None:
    named = ("ui.auth.impersonateGroups[0]=ml-team", "ui.auth.impersonateGroups[1]=readers")
    rendered = render(helm, *PROXY, "ui.auth.groupsHeader=X-Forwarded-Groups", *named)
    rules = one(rendered, "ClusterRole", UI)["rules"]
    (groups,) = [r for r in rules if "groups" in r["resources"]]
    assert groups == {
        "apiGroups": [""],
        "resources": ["groups"],
        "verbs": ["impersonate"],
        "resourceNames": ["ml-team", "readers"],
    }
    command = pod_spec(rendered, UI)["containers"][0]["command"]
    assert (
        "--impersonate-groups=ml-team,readers" in command and "--groups-header=X-Forwarded-Groups" in command
    )


@pytest.mark.parametrize("group", ["system:masters", "system:nodes"])
def test_a_system_group_to_impersonate_fails_to_render(helm: tuple[str, Path], group: str) -> None:
    result = helm_template(
        helm, *PROXY, "ui.auth.impersonateGroups[0]=ml", f"ui.auth.impersonateGroups[1]={group}"
    )
    assert result.returncode != 0
    assert (
        f"ui.auth.impersonateGroups: {group}: groups starting with system: are the cluster's own"
        in result.stderr
    )


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


def test_a_group_name_with_a_comma_fails_to_render(helm: tuple[str, Path]) -> None:
    result = helm_template(helm, *PROXY, "ui.auth.impersonateGroups[0]=ml\\,ops")
    assert result.returncode != 0
    assert "ui.auth.impersonateGroups: ml,ops: a group name with a comma" in result.stderr


def test_in_token_mode_named_groups_grant_no_impersonation(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "ui.enabled=true", "ui.auth.impersonateGroups[0]=ml")
    rules = one(rendered, "ClusterRole", UI)["rules"]
    assert not [r for r in rules if "impersonate" in r["verbs"]]
