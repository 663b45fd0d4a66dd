"""A job as a list row, and how the list is filtered, stably sorted and paged."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.builders import job
from tests.ui.helpers import pod, pytorch, with_status
from trainop.ui.summary import Query, Replicas, select, summarize


def rows(*names: str, **states: str):
    return [
        summarize(
            with_status(pytorch(n), ("Created", "C"), (states.get(n, "Running"), "R")),
            f"default/PyTorchJob/{n}",
        )
        for n in names
    ]


def test_the_state_is_the_last_true_condition_with_its_reason():
    obj = with_status(pytorch("a"), ("Created", "PyTorchJobCreated"), ("Running", "PyTorchJobRunning"))
    obj["status"]["conditions"].append({"type": "Restarting", "status": "False", "reason": "x"})
    s = summarize(obj, "k")
    assert (s.state, s.reason) == ("Running", "PyTorchJobRunning")


def test_a_job_without_conditions_is_pending():
    assert summarize(pytorch("a"), "k").state == "Pending"


def test_replica_counts_come_from_the_replica_statuses_by_type():
    obj = with_status(
        pytorch("a"), replicaStatuses={"Worker": {"active": 1, "failed": 1}, "Master": {"succeeded": 1}}
    )
    assert summarize(obj, "k").replicas == (("Master", Replicas(0, 1, 0)), ("Worker", Replicas(1, 0, 1)))


def test_restarts_add_up_every_containers_restart_count():
    assert (
        summarize(pytorch("a"), "k", [pod("a-worker-0", restarts=2), pod("a-worker-1", restarts=1)]).restarts
        == 3
    )


def test_the_queue_is_kueues_label():
    obj = pytorch("a")
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    assert summarize(obj, "k").queue == "team-a"


def test_a_finished_jobs_duration_ends_at_its_completion():
    obj = with_status(
        pytorch("a"), ("Created", "C"), ("Succeeded", "S"), completionTime="2026-12-01T10:30:00Z"
    )
    assert summarize(obj, "k").duration(datetime(2030, 1, 1, tzinfo=UTC)) == 1800


def test_filters_by_namespace_kind_state_and_every_word_of_the_text():
    mine = summarize(with_status(pytorch("mnist", "team-a"), ("Failed", "BackoffLimitExceeded")), "1")
    other_ns = summarize(with_status(pytorch("mnist", "team-b"), ("Failed", "BackoffLimitExceeded")), "2")
    other_kind = summarize(with_status(job("TFJob", "mnist", "team-a", Worker=1), ("Failed", "x")), "3")
    running = summarize(with_status(pytorch("mnist-2", "team-a"), ("Running", "R")), "4")
    query = Query(namespace="team-a", kind="PyTorchJob", state="Failed", text="MNIST backoff")
    assert select([mine, other_ns, other_kind, running], query).rows == [mine]


def test_sorting_by_state_keeps_equal_rows_in_the_same_order_whatever_the_input_order():
    all_rows = rows("c", "a", "b", "d", d="Failed")
    query = Query(sort="state", descending=False)
    first = [s.name for s in select(all_rows, query).rows]
    again = [s.name for s in select(list(reversed(all_rows)), query).rows]
    assert first == again == ["d", "a", "b", "c"]


def test_pages_cut_the_sorted_rows_and_a_page_past_the_end_is_the_last():
    all_rows = rows(*(f"j{i:02d}" for i in range(60)))
    page = select(all_rows, Query(sort="name", descending=False, size=25, page=3))
    assert (page.page, page.pages, page.total) == (3, 3, 60)
    assert [s.name for s in page.rows] == [f"j{i:02d}" for i in range(50, 60)]
    assert select(all_rows, Query(sort="name", size=25, page=9)).page == 3


def test_a_query_from_the_url_ignores_unknown_sorts_and_page_sizes():
    query = Query.from_args({"sort": "bogus", "size": "7", "page": "-3", "q": "  x  "})
    assert (query.sort, query.size, query.page, query.text) == ("created", 50, 1, "x")


def test_pods_recreated_after_a_failure_count_as_restarts_without_the_pods():
    obj = with_status(pytorch("a"), podRestarts={"uid-1": {"replicaType": "Worker"}, "uid-2": {}})
    assert summarize(obj, "k").restarts == 2
