"""The parse-cost estimate both HTTP edges check before parsing, and the per-process budget it is held in."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import orjson
import pytest
import yaml

from tests.builders import T0, admission_review
from tests.realistic import resync_request
from trainop.jsoncost import (
    COST_FLOOR,
    MAX_COST_PER_BYTE,
    Budget,
    Claim,
    TooCostly,
    check_parse_cost,
    parse_cost,
)

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024


def padded(unit: bytes, size: int) -> bytes:
    return b'{"pad":[' + unit * (size // len(unit)) + b"0]}"


@pytest.mark.parametrize("unit", [b"[],", b"{},", b'{"a":1},', b"[1],", b'"ab",', b"0.5,", b"[[[]]],"])
def test_the_estimate_is_at_least_what_parsing_allocates(unit: bytes) -> None:
    import tracemalloc

    data = padded(unit, MIB)
    tracemalloc.start()
    try:
        value = orjson.loads(data)
        allocated, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del value
    assert parse_cost(data) >= allocated


@pytest.mark.parametrize("unit", [b"[],", b"{},", b'{"a":1},', b"[1],", b'"ab",', b"0.5,"])
def test_bodies_of_many_small_values_are_refused_before_parsing(unit: bytes) -> None:
    with pytest.raises(TooCostly, match="more than 8 times its size"):
        check_parse_cost(padded(unit, 2 * COST_FLOOR // MAX_COST_PER_BYTE), most=1 << 40)


def test_a_small_dense_body_is_admitted() -> None:
    # Under the floor, density does not matter: a few MiB of objects are nothing a worker cannot hold.
    assert check_parse_cost(padded(b"[],", 64 * 1024), most=COST_FLOOR) <= COST_FLOOR


@pytest.mark.parametrize("kind", ["PyTorchJob", "TFJob"])
def test_metacontrollers_resync_of_a_large_job_is_admitted(kind: str) -> None:
    data = resync_request(kind, 300, T0)
    assert len(data) * MAX_COST_PER_BYTE > COST_FLOOR  # dense enough to be judged by its density
    check_parse_cost(data, most=1 << 40)


EXAMPLE_JOBS = sorted((REPO / "trainop" / "examples").glob("*/job.yaml"))


@pytest.mark.parametrize("path", EXAMPLE_JOBS, ids=lambda p: p.parent.name)
def test_admission_reviews_of_the_examples_are_admitted_even_if_they_were_large(path: Path) -> None:
    for obj in yaml.safe_load_all(path.read_text()):
        if not isinstance(obj, dict) or obj.get("apiVersion") != "kubeflow.org/v1":
            continue
        data = json.dumps(admission_review(obj, "UPDATE", obj)).encode()
        # The density of a review, not its size, is what is judged once the floor is passed.
        assert parse_cost(data) <= MAX_COST_PER_BYTE * len(data)


def test_a_claim_grows_to_what_the_request_costs_and_gives_it_back() -> None:
    budget = Budget(100)
    claim = Claim(budget)
    assert claim.grow(10, wait=0) and budget.held == 10
    assert claim.grow(60, wait=0) and budget.held == 60
    claim.release()
    assert budget.held == 0


def test_a_request_that_does_not_fit_beside_the_others_is_refused_after_its_wait() -> None:
    budget = Budget(100)
    first = Claim(budget)
    assert first.grow(80, wait=0)
    second = Claim(budget)
    assert not second.grow(30, wait=0.01)
    assert second.held == 0 and budget.held == 80


def test_a_body_costing_more_than_the_whole_budget_is_refused() -> None:
    data = b'["' + b"x" * 100 + b'"]'
    with pytest.raises(TooCostly, match=f"more than the {len(data) - 1} bytes this server parses at once"):
        check_parse_cost(data, most=len(data) - 1)


def test_a_declared_length_over_the_whole_budget_waits_for_an_idle_process() -> None:
    budget = Budget(100)
    big = Claim(budget)
    assert big.grow(1000, wait=0) and budget.held == 100
    assert not Claim(budget).grow(1, wait=0)
    big.release()
    assert Claim(budget).grow(1, wait=0)


def test_a_waiting_request_goes_ahead_when_another_releases() -> None:
    budget = Budget(100)
    first = Claim(budget)
    first.grow(100, wait=0)
    timer = threading.Timer(0.05, first.release)
    timer.start()
    try:
        assert Claim(budget).grow(50, wait=30)
    finally:
        timer.join()
