"""The sync body's bound in small (hooks/bodycost.py): what a job's children may be, judged before parsing."""

from __future__ import annotations

import orjson
import pytest

from hooks.bodycost import (
    CHILDREN_FACTOR,
    EXTRA_CHILDREN,
    Allowance,
    check_children,
    children_allowance,
    too_many_children,
)
from tests.builders import job
from trainop.jsoncost import COST_FLOOR, TooCostly, leading_member, parse_cost


def test_the_cost_of_a_body_is_the_sum_of_the_costs_of_its_parts() -> None:
    data = b'{"a":[1,2],"b":{"c":[{}]}}'
    assert parse_cost(data, 0, 11) + parse_cost(data, 11) == parse_cost(data)


def test_the_job_is_read_from_the_head_after_the_controller_and_nothing_after_it() -> None:
    data = b'{"controller": {"x": 1}, "parent": {"kind": "TFJob"}, "children": [not json'
    value, end = leading_member(data, "parent", ("controller",), 1000)
    assert value == {"kind": "TFJob"} and data[end:].startswith(b', "children"')


@pytest.mark.parametrize(
    "data",
    [b'{"children": {}, "parent": {}}', b'{"parent": {"a": ', b"[]", b'{"controller": 1 "parent": {}}'],
)
def test_a_head_without_the_job_first_is_not_read(data: bytes) -> None:
    assert leading_member(data, "parent", ("controller",), 1000) is None


def test_a_non_ascii_head_ends_at_the_right_byte() -> None:
    data = '{"parent": {"n": "é"}, "children": {}}'.encode()
    assert leading_member(data, "parent", (), 100) == ({"n": "é"}, len('{"parent": {"n": "é"}'.encode()))


def test_the_allowance_counts_pods_services_and_the_other_children() -> None:
    allowance = children_allowance(job("PyTorchJob", Master=1, Worker=9))
    assert allowance.children == 2 * 10 + EXTRA_CHILDREN
    bigger = children_allowance(job("PyTorchJob", Master=1, Worker=99))
    assert bigger.cost > 5 * allowance.cost  # linear in the pods, past the other children


def test_after_a_scale_down_the_pods_the_status_counted_are_still_allowed() -> None:
    shrunk = job("PyTorchJob", Master=1, Worker=10)
    shrunk["status"] = {"replicaStatuses": {"Worker": {"active": 1000}, "Master": {"active": 1}}}
    assert children_allowance(shrunk).children == 2 * 1001 + EXTRA_CHILDREN


def test_what_no_job_can_imply_is_not_allowed() -> None:
    assert children_allowance({"kind": "NoSuchJob"}) == Allowance(0, 0)
    assert children_allowance([]) == Allowance(0, 0)


def test_far_more_children_than_the_job_implies_are_refused() -> None:
    allowance = children_allowance(job("JAXJob", Worker=10))
    parent = job("JAXJob", Worker=10)
    assert too_many_children(parent, CHILDREN_FACTOR * allowance.children + EXTRA_CHILDREN, allowance) is None
    error = too_many_children(parent, 10 * allowance.children, allowance)
    assert error is not None and "JAXJob default/job" in error


def test_a_body_over_the_floor_whose_children_cost_more_than_its_job_allows_is_refused() -> None:
    parent = orjson.dumps(job("PyTorchJob", name="small", Master=1, Worker=1))
    pod = b'{"metadata":{"name":"p"},"spec":{"containers":[' + b'{"name":"c"},' * 2000 + b'{"name":"c"}]}}'
    body = (
        b'{"parent":'
        + parent
        + b',"children":{"Pod.v1":{'
        + b",".join(b'"p%d":%s' % (i, pod) for i in range(120))
        + b"}}}"
    )
    cost = parse_cost(body)
    assert cost > COST_FLOOR
    with pytest.raises(TooCostly, match="the children of PyTorchJob default/small would take ~"):
        check_children(body, cost)


def test_a_body_over_the_floor_without_its_job_first_is_refused() -> None:
    body = b'{"children":{"Pod.v1":{"p":[' + b"[]," * (COST_FLOOR // 100) + b'[]]}},"parent":{}}'
    with pytest.raises(TooCostly, match="must end within its first 4 MiB"):
        check_children(body, parse_cost(body))
