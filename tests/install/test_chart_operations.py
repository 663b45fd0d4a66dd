"""What the chart and manifests ship for operating the servers: metrics ports, ServiceMonitors, the Grafana
dashboard and the NetworkPolicies that keep everyone but Metacontroller away from the hooks."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.install.test_manifests import (
    CHART,
    applied,
    find,
    helm_template,
    installed,
    one,
    pod_spec,
    render,
)
from trainop.install import manifests
from trainop.jsontypes import Json

__all__ = ["applied", "installed"]  # fixtures
KUBEFLOW_COUNTERS = [
    f"training_operator_jobs_{what}_total"
    for what in ("created", "deleted", "successful", "failed", "restarted")
]
METRICS_PORTS = {manifests.HOOKS_NAME: 8081, manifests.WEBHOOKS_NAME: 8082}


def ingress_ports(policy: Json) -> dict[str, list[Json] | None]:
    """Each ingress rule's port name -> its peers (None: from anywhere)."""
    out: dict[str, list[Json] | None] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            out[port["port"]] = rule.get("from")
    return out


def test_both_servers_expose_a_metrics_port_on_their_service(installed: list[Json]) -> None:
    for name, port in METRICS_PORTS.items():
        [container] = pod_spec(installed, name)["containers"]
        assert {"name": "metrics", "containerPort": port} in container["ports"]
        service_ports = one(installed, "Service", name)["spec"]["ports"]
        assert {"name": "metrics", "port": port, "targetPort": "metrics"} in service_ports


def test_metric_files_live_on_the_writable_tmpfs(installed: list[Json]) -> None:
    for name in METRICS_PORTS:
        pod = pod_spec(installed, name)
        [container] = pod["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volume = next(v for v in pod["volumes"] if v["name"] == mounts["/tmp"])
        assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
        assert volume["emptyDir"]["medium"] == "Memory"


def test_only_metacontroller_may_call_the_hooks(installed: list[Json]) -> None:
    ports = ingress_ports(one(installed, "NetworkPolicy", manifests.HOOKS_NAME))
    [peer] = ports["http"] or []
    assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "metacontroller"}}
    assert set(ports) == {"http", "metrics"}


def test_the_webhooks_serving_port_is_open_and_nothing_else_but_metrics(installed: list[Json]) -> None:
    ports = ingress_ports(one(installed, "NetworkPolicy", manifests.WEBHOOKS_NAME))
    assert ports["https"] is None
    assert set(ports) == {"https", "metrics"}


def test_the_policies_select_the_servers_pods(installed: list[Json]) -> None:
    for name in METRICS_PORTS:
        policy = one(installed, "NetworkPolicy", name)
        labels = pod_spec_labels(installed, name)
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def pod_spec_labels(docs: list[Json], name: str) -> dict[str, str]:
    labels: dict[str, str] = one(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
    return labels


def test_the_chart_ships_the_manifests_network_policies_by_default(
    helm: tuple[str, Path], installed: list[Json]
) -> None:
    rendered = render(helm)
    for name in METRICS_PORTS:
        chart, mine = (
            one(rendered, "NetworkPolicy", name)["spec"],
            one(installed, "NetworkPolicy", name)["spec"],
        )
        assert chart["ingress"] == mine["ingress"]
        assert mine["podSelector"]["matchLabels"].items() <= chart["podSelector"]["matchLabels"].items()


def test_the_chart_can_leave_network_policies_out(helm: tuple[str, Path]) -> None:
    assert find(render(helm, "networkPolicy.enabled=false"), "NetworkPolicy") == []


def test_the_chart_lets_the_metrics_scrapers_be_narrowed(helm: tuple[str, Path]) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    rendered = render(
        helm,
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
    )
    for name in METRICS_PORTS:
        assert ingress_ports(one(rendered, "NetworkPolicy", name))["metrics"] == [peer]


MONITORING_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def test_the_manifests_metrics_ports_admit_only_the_monitoring_namespace(installed: list[Json]) -> None:
    for name in METRICS_PORTS:
        assert ingress_ports(one(installed, "NetworkPolicy", name))["metrics"] == [MONITORING_PEER]


def test_the_charts_metrics_ports_admit_only_the_monitoring_namespace_by_default(
    helm: tuple[str, Path],
) -> None:
    rendered = render(helm)
    for name in METRICS_PORTS:
        assert ingress_ports(one(rendered, "NetworkPolicy", name))["metrics"] == [MONITORING_PEER]


def test_the_monitoring_namespace_is_a_value(helm: tuple[str, Path]) -> None:
    rendered = render(helm, "networkPolicy.monitoringNamespace=observability")
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}
    for name in METRICS_PORTS:
        assert ingress_ports(one(rendered, "NetworkPolicy", name))["metrics"] == [peer]


def test_the_chart_refuses_metrics_open_to_nobody_named_and_says_how_to_fix_it(
    helm: tuple[str, Path],
) -> None:
    result = helm_template(helm, "networkPolicy.monitoringNamespace=")
    assert result.returncode != 0
    assert "networkPolicy.monitoringNamespace is empty" in result.stderr
    assert "networkPolicy.metricsFrom" in result.stderr


def test_the_service_monitor_scrapes_the_metrics_port_of_both_services(helm: tuple[str, Path]) -> None:
    rendered = render(
        helm, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom"
    )
    [monitor] = find(rendered, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [s for s in find(rendered, "Service") if selector.items() <= s["metadata"]["labels"].items()]
    assert sorted(s["metadata"]["name"] for s in selected) == sorted(METRICS_PORTS)


def test_no_service_monitor_unless_asked(helm: tuple[str, Path]) -> None:
    assert find(render(helm), "ServiceMonitor") == []


def test_the_dashboard_configmap_holds_grafana_json_over_kubeflows_counters(helm: tuple[str, Path]) -> None:
    [config] = find(render(helm, "metrics.dashboard.enabled=true"), "ConfigMap", "trainop-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config["data"]["trainop.json"])
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for counter in KUBEFLOW_COUNTERS:
        assert counter in exprs
    assert dashboard == json.loads((CHART / "files" / "dashboards" / "trainop.json").read_text())


def test_the_bundled_metacontroller_serves_its_metrics() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["metacontroller"]
    assert "--metrics-address=:9999" in values["commandArgs"]
    assert {"name": "metrics", "port": 9999, "protocol": "TCP", "targetPort": 9999} in values["service"][
        "ports"
    ]
