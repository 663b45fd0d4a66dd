"""Where the chart's servers run and how long they survive a drain: priority, spread over nodes, and the
PodDisruptionBudgets of the hooks and webhooks (`helm template`, no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.install.test_manifests import find, helm_template, one, pod_spec, render
from trainop.jsontypes import Json

SERVERS = ("trainop-hooks", "trainop-webhooks")


def selector_labels(component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "trainop",
        "app.kubernetes.io/instance": "trainop",
        "app.kubernetes.io/component": component,
    }


def pdbs(docs: list[Json]) -> dict[str, Json]:
    return {d["metadata"]["name"]: d["spec"] for d in find(docs, "PodDisruptionBudget")}


@pytest.mark.parametrize("name", SERVERS)
def test_both_servers_run_at_system_cluster_critical_priority_by_default(
    helm: tuple[str, Path], name: str
) -> None:
    assert pod_spec(render(helm), name)["priorityClassName"] == "system-cluster-critical"


def test_the_priority_class_is_a_value(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "priorityClassName=trainop-critical")
    assert {pod_spec(rendered, n)["priorityClassName"] for n in SERVERS} == {"trainop-critical"}


def test_an_empty_priority_class_leaves_the_clusters_default(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "priorityClassName=")
    assert [n for n in SERVERS if "priorityClassName" in pod_spec(rendered, n)] == []


@pytest.mark.parametrize("name", SERVERS)
def test_each_servers_replicas_spread_softly_over_nodes_by_default(helm: tuple[str, Path], name: str) -> None:
    component = name.removeprefix("trainop-")
    [constraint] = pod_spec(render(helm), name)["topologySpreadConstraints"]
    assert constraint == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": selector_labels(component)},
        "matchLabelKeys": ["pod-template-hash"],
    }


def test_the_spread_selects_the_pods_of_its_own_deployment(helm: tuple[str, Path]) -> None:
    rendered = render(helm)
    for name in SERVERS:
        [constraint] = pod_spec(rendered, name)["topologySpreadConstraints"]
        labels = one(rendered, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()


def test_the_spread_can_be_made_hard_and_zonal(helm: tuple[str, Path]) -> None:
    rendered = render(
        helm,
        "hooks.topologySpreadConstraints[0].maxSkew=1",
        "hooks.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "hooks.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
    )
    [constraint] = pod_spec(rendered, "trainop-hooks")["topologySpreadConstraints"]
    assert constraint["topologyKey"] == "topology.kubernetes.io/zone"
    assert constraint["whenUnsatisfiable"] == "DoNotSchedule"
    assert constraint["labelSelector"] == {"matchLabels": selector_labels("hooks")}


def test_a_spread_entry_with_its_own_selector_is_kept_as_given(helm: tuple[str, Path]) -> None:
    rendered = render(
        helm,
        "webhooks.topologySpreadConstraints[0].maxSkew=2",
        "webhooks.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
        "webhooks.topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "webhooks.topologySpreadConstraints[0].labelSelector.matchLabels.team=ml",
    )
    [constraint] = pod_spec(rendered, "trainop-webhooks")["topologySpreadConstraints"]
    assert constraint == {
        "maxSkew": 2,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"team": "ml"}},
    }


def test_without_spread_constraints_nothing_is_spread(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "hooks.topologySpreadConstraints=null")
    assert "topologySpreadConstraints" not in pod_spec(rendered, "trainop-hooks")
    assert "topologySpreadConstraints" in pod_spec(rendered, "trainop-webhooks")


def test_a_drain_keeps_one_pod_of_each_server(helm: tuple[str, Path]) -> None:
    assert pdbs(render(helm)) == {
        name: {"minAvailable": 1, "selector": {"matchLabels": selector_labels(name.removeprefix("trainop-"))}}
        for name in SERVERS
    }


def test_a_single_replica_server_gets_no_budget_that_would_block_every_drain(helm: tuple[str, Path]) -> None:
    assert set(pdbs(render(helm, "hooks.replicas=1"))) == {"trainop-webhooks"}
    assert set(pdbs(render(helm, "webhooks.replicas=1"))) == {"trainop-hooks"}


def test_a_servers_budget_can_be_turned_off(helm: tuple[str, Path]) -> None:
    assert set(pdbs(render(helm, "hooks.podDisruptionBudget.enabled=false"))) == {"trainop-webhooks"}


def test_each_budget_selects_exactly_its_servers_pods(helm: tuple[str, Path]) -> None:
    rendered = render(helm)
    for name, spec in pdbs(rendered).items():
        labels = one(rendered, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        others = [n for n in SERVERS if n != name]
        for other in others:
            other_labels = one(rendered, "Deployment", other)["spec"]["template"]["metadata"]["labels"]
            assert not spec["selector"]["matchLabels"].items() <= other_labels.items()


def test_the_chart_renders_with_a_release_of_another_name(helm: tuple[str, Path]) -> None:
    result = helm_template(helm, "fullnameOverride=ops")
    assert result.returncode == 0, result.stderr
