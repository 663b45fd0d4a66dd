"""Placement annotations: their policies, the affinity terms they expand to, defaults and errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, job, replica
from trainop.api.checks import Result
from trainop.extensions.base import Draft
from trainop.extensions.placement import (
    ANNOTATION,
    DEFAULTS_ENV,
    HOSTNAME,
    Placement,
    Policy,
    affinity_terms,
    parse_defaults,
    parse_policy,
    with_terms,
)

OPERATOR = "training.kubeflow.org/operator-name"
JOB = "training.kubeflow.org/job-name"
TYPE = "training.kubeflow.org/replica-type"
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def tfjob(annotations: dict[str, str] | None = None, **replicas: int) -> dict[str, Any]:
    counts = replicas or {"PS": 2, "Worker": 3}
    out = job(
        "TFJob", name="j", **{t: replica("TFJob", n, [container("tensorflow")]) for t, n in counts.items()}
    )
    if annotations:
        out["metadata"]["annotations"] = dict(annotations)
    return out


def affinity(obj: dict[str, Any], rtype: str) -> dict[str, Any]:
    return obj["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"].get("affinity", {})


def defaulted(obj: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    ext = Placement(env or {})
    values = {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if ext.owns(k)}
    return ext.default(Draft(obj), values).job


def validated(obj: dict[str, Any], env: dict[str, str] | None = None) -> Result:
    ext = Placement(env or {})
    values = {k: v for k, v in (obj["metadata"].get("annotations") or {}).items() if ext.owns(k)}
    result = Result()
    ext.validate(Draft(obj), values, result)
    return result


class TestPolicies:
    @pytest.mark.parametrize(
        ("value", "policy"),
        [
            ("spread", Policy("spread", HOSTNAME, True)),
            ("spread-preferred", Policy("spread", HOSTNAME, False)),
            (f"spread:{ZONE}", Policy("spread", ZONE, True)),
            ("pack:rack", Policy("pack", "rack", True)),
            (f"pack-preferred:{ZONE}", Policy("pack", ZONE, False)),
            (
                "exclusive:cloud.google.com/gke-nodepool",
                Policy("exclusive", "cloud.google.com/gke-nodepool", True),
            ),
        ],
    )
    def test_a_value_names_mode_key_and_strength(self, value: str, policy: Policy) -> None:
        assert parse_policy(value) == policy

    @pytest.mark.parametrize(
        "value", ["Spread", "scatter", "pack", "exclusive", "spread:", "pack:-bad", "pack:a/b/c"]
    )
    def test_a_bad_value_says_what_is_allowed(self, value: str) -> None:
        problem = parse_policy(value)
        assert isinstance(problem, str)
        assert f'"{value}"' in problem

    def test_pack_without_a_label_asks_for_one(self) -> None:
        assert "needs a node label" in str(parse_policy("pack"))


class TestTerms:
    def test_spread_is_anti_affinity_among_the_pods_of_one_replica_type(self) -> None:
        [(kind, strength, term)] = affinity_terms(Policy("spread", HOSTNAME, True))
        assert (kind, strength) == ("podAntiAffinity", REQUIRED)
        assert term == {
            "labelSelector": {"matchExpressions": [{"key": OPERATOR, "operator": "Exists"}]},
            "topologyKey": HOSTNAME,
            "matchLabelKeys": [JOB, TYPE],
        }

    def test_a_preferred_rule_has_weight_100(self) -> None:
        [(_, strength, term)] = affinity_terms(Policy("spread", HOSTNAME, False))
        assert strength == PREFERRED
        assert term["weight"] == 100
        assert term["podAffinityTerm"]["matchLabelKeys"] == [JOB, TYPE]

    def test_pack_is_affinity_to_the_jobs_pods(self) -> None:
        [(kind, _, term)] = affinity_terms(Policy("pack", ZONE, True))
        assert kind == "podAffinity"
        assert (term["topologyKey"], term["matchLabelKeys"]) == (ZONE, [JOB])

    def test_exclusive_also_repels_other_jobs(self) -> None:
        (_, _, _), (kind, strength, term) = affinity_terms(Policy("exclusive", "rack", True))
        assert (kind, strength) == ("podAntiAffinity", REQUIRED)
        assert term["mismatchLabelKeys"] == [JOB]
        assert "matchLabelKeys" not in term

    def test_no_term_names_a_job_or_replica_type_value(self) -> None:
        for mode in ("spread", "pack", "exclusive"):
            for _, _, term in affinity_terms(Policy(mode, ZONE, True)):
                assert "matchLabels" not in term["labelSelector"]

    def test_adding_terms_twice_changes_nothing(self) -> None:
        template = {"spec": {"containers": []}}
        once = with_terms(template, Policy("exclusive", "rack", True))
        assert with_terms(once, Policy("exclusive", "rack", True)) is once

    def test_the_users_own_affinity_is_kept(self) -> None:
        mine = {"nodeAffinity": {"x": 1}, "podAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": {}}]}}
        template = {"spec": {"affinity": mine}}
        out = with_terms(template, Policy("pack", ZONE, True))
        assert out["spec"]["affinity"]["nodeAffinity"] == {"x": 1}
        assert out["spec"]["affinity"]["podAffinity"][PREFERRED] == mine["podAffinity"][PREFERRED]
        assert len(out["spec"]["affinity"]["podAffinity"][REQUIRED]) == 1
        assert template["spec"]["affinity"] is mine and REQUIRED not in mine["podAffinity"]


class TestDefaulting:
    def test_a_job_wide_policy_reaches_every_replica_type(self) -> None:
        out = defaulted(tfjob({ANNOTATION: f"pack:{ZONE}"}))
        for rtype in ("PS", "Worker"):
            assert affinity(out, rtype)["podAffinity"][REQUIRED][0]["topologyKey"] == ZONE

    def test_a_replica_types_policy_wins_over_the_job_wide_one(self) -> None:
        out = defaulted(tfjob({ANNOTATION: f"pack:{ZONE}", f"{ANNOTATION}.PS": "spread"}))
        assert set(affinity(out, "PS")) == {"podAntiAffinity"}
        assert set(affinity(out, "Worker")) == {"podAffinity"}

    def test_cluster_defaults_are_written_in_as_annotations(self) -> None:
        out = defaulted(tfjob(), {DEFAULTS_ENV: "PS=spread-preferred"})
        assert out["metadata"]["annotations"] == {f"{ANNOTATION}.PS": "spread-preferred"}
        assert PREFERRED in affinity(out, "PS")["podAntiAffinity"]
        assert affinity(out, "Worker") == {}

    def test_a_jobs_own_policy_wins_over_the_cluster_default(self) -> None:
        out = defaulted(tfjob({ANNOTATION: f"pack:{ZONE}"}), {DEFAULTS_ENV: "PS=spread"})
        assert out["metadata"]["annotations"] == {ANNOTATION: f"pack:{ZONE}"}
        assert set(affinity(out, "PS")) == {"podAffinity"}

    def test_defaulting_twice_is_defaulting_once(self) -> None:
        once = defaulted(tfjob({f"{ANNOTATION}.Worker": "exclusive:rack"}), {DEFAULTS_ENV: "PS=spread"})
        assert defaulted(once, {DEFAULTS_ENV: "PS=spread"}) == once

    def test_a_bad_value_leaves_the_template_alone(self) -> None:
        obj = tfjob({ANNOTATION: "scatter"})
        assert defaulted(obj) is obj


class TestValidation:
    def test_a_bad_value_is_an_error_at_the_annotation(self) -> None:
        [error] = validated(tfjob({f"{ANNOTATION}.Worker": "scatter"})).errors
        assert error.path == f"metadata.annotations[{ANNOTATION}.Worker]"
        assert "spread" in error.detail

    def test_an_unknown_replica_type_is_named_with_the_jobs_types(self) -> None:
        [error] = validated(tfjob({f"{ANNOTATION}.Chief": "spread"})).errors
        assert error.path == f"metadata.annotations[{ANNOTATION}.Chief]"
        assert "PS, Worker" in error.detail

    def test_a_hard_spread_warns_how_many_nodes_it_needs(self) -> None:
        result = validated(tfjob({f"{ANNOTATION}.Worker": "spread"}))
        assert result.ok
        [warning] = result.warnings
        assert warning.startswith("spec.tfReplicaSpecs[Worker]: placement spread")
        assert "3 nodes" in warning

    def test_a_preferred_rule_warns_of_nothing(self) -> None:
        assert validated(tfjob({ANNOTATION: "spread-preferred"})).warnings == []

    def test_broken_cluster_defaults_are_an_error_naming_the_setting(self) -> None:
        [error] = validated(tfjob(), {DEFAULTS_ENV: "PS=scatter"}).errors
        assert error.path == DEFAULTS_ENV


def test_defaults_parse_from_the_setting() -> None:
    assert parse_defaults("PS=spread, Worker=pack:rack") == {
        "PS": Policy("spread", HOSTNAME, True),
        "Worker": Policy("pack", "rack", True),
    }
    with pytest.raises(ValueError, match="PS"):
        parse_defaults("PS")
