"""What a page view and an event stream of `trainop ui --cluster` cost the apiserver and the UI, and what a
malformed job address does, through flask's test client against the fake apiserver."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from tests.ui.fakeapi import FakeApi, event, serving
from trainop.envvalues import SettingError
from trainop.ui.app import create_app
from trainop.ui.auth import AuthSettings
from trainop.ui.cluster import EVENTS_PAGE, EVENTS_PER_OBJECT, MAX_LOG_CONTAINERS, Cluster
from trainop.ui.settings import UiSettings
from trainop.ui.source import User

MNIST = "team-a/PyTorchJob/mnist"
PROXY = UiSettings(
    writable=True,
    auth=AuthSettings("proxy", "X-Forwarded-User", proxy_secret="from-the-proxy"),
    poll_seconds=0.02,
)
FROM_THE_PROXY = {"X-Trainop-Proxy-Secret": "from-the-proxy"}
ALICE = {**FROM_THE_PROXY, "X-Forwarded-User": "alice"}


def user(name: str) -> dict[str, str]:
    return {**FROM_THE_PROXY, "X-Forwarded-User": name}


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, Cluster]]:
    fake = FakeApi()
    with serving(fake) as client:
        yield fake, Cluster(client)


def settles(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    """Whether `condition` holds within `seconds` (threads and sockets end a moment after being told)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def job_reads(fake: FakeApi) -> int:
    return sum(1 for method, path, _ in fake.seen if method == "GET" and path.endswith("/pytorchjobs/mnist"))


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("team-a/PyTorchJob/", "the job name is empty"),
        ("team-a/PyTorchJob/Mnist", "job name &#39;Mnist&#39; is not a DNS subdomain"),
        ("team-a/Pod/mnist", "unknown kind &#39;Pod&#39;"),
        ("Team-A/PyTorchJob/mnist", "namespace &#39;Team-A&#39; is not a DNS label"),
    ],
)
def test_the_page_of_a_malformed_job_address_is_a_404_that_says_what_is_wrong(
    api: tuple[FakeApi, Cluster], key: str, message: str
):
    fake, cluster = api
    answer = create_app(cluster, PROXY).test_client().get(f"/job/{key}", headers=ALICE)
    assert answer.status_code == 404 and message in answer.text
    assert not [path for _, path, _ in fake.seen if "pytorchjobs" in path]


def test_a_delete_of_a_job_address_with_an_empty_name_is_a_404_and_deletes_nothing(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.writers.add("alice")
    client = create_app(cluster, PROXY).test_client()
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/new", headers=ALICE).text)
    assert csrf
    answer = client.post(
        "/action/delete/team-a/PyTorchJob/",
        data={"csrf": csrf.group(1)},
        headers={**ALICE, "Origin": "http://localhost"},
    )
    assert answer.status_code == 404 and "the job name is empty" in answer.text
    assert [w for w in fake.writes if not w.endswith("/selfsubjectaccessreviews")] == []


def test_ten_views_of_a_200_pod_job_leave_no_thread_and_no_log_follow_open(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.workers = 200
    client = create_app(cluster, PROXY).test_client()
    before = threading.active_count()
    for _ in range(10):
        page = client.get(f"/job/{MNIST}", headers=ALICE)
        assert page.status_code == 200
        assert f"the logs of the first {MAX_LOG_CONTAINERS} of 200 containers" in page.text
    log_reads = [path for _, path, _ in fake.seen if "/log?" in path]
    assert len(log_reads) == 10 * MAX_LOG_CONTAINERS
    assert all("tailLines=500&limitBytes=" in path and "follow" not in path for path in log_reads)
    assert fake.follows_opened == 0
    assert settles(lambda: threading.active_count() <= before)


# A pump that dies with a traceback when its follow is cut is a bug too, not only one left running.
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_followed_log_closes_its_follows_and_their_threads_when_the_client_goes(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    client = create_app(cluster, PROXY).test_client()
    before = threading.active_count()
    answer = client.get(f"/stream/logs/{MNIST}", headers=ALICE)
    body = answer.response
    next(body)
    assert next(body).startswith(b"event: reset")
    assert fake.follows_open == 2
    answer.close()
    assert settles(lambda: fake.follows_open == 0)
    assert settles(lambda: threading.active_count() <= before)


def test_64_idle_streams_of_one_job_share_one_poll_of_the_apiserver(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    client = create_app(cluster, PROXY).test_client()
    users = [f"user-{i // PROXY.max_user_streams}" for i in range(64)]  # each within their quota
    answers = [client.get(f"/stream/job/{MNIST}", headers=user(name)) for name in users]
    assert [a.status_code for a in answers] == [200] * 64
    bodies = [a.response for a in answers]
    for body in bodies:
        assert next(body).startswith(b"retry:")
        assert next(body).startswith(b"event: parts")
    [(polled, subscribers)] = cluster.polls.active().items()
    assert subscribers == 64
    reads, gets = cluster.polls.reads(polled), job_reads(fake)
    for _ in range(3):  # every stream answers three more times (idle, or the picture's time moved)
        assert all(next(body).startswith((b": idle", b"event: parts")) for body in bodies)
    # Each read of the one poller is one GET of the job, however many streams show it.
    assert job_reads(fake) - gets <= cluster.polls.reads(polled) - reads + 1
    assert cluster.polls.reads(polled) - reads < 64


def test_users_who_may_read_different_scheduling_objects_never_share_a_poller(
    api: tuple[FakeApi, Cluster],
) -> None:
    fake, cluster = api
    fake.denied.add(("bob", "podgroups"))  # alice may read the job's PodGroups, bob may not
    client = create_app(cluster, PROXY).test_client()
    answers = [client.get(f"/stream/job/{MNIST}", headers=user(name)) for name in ("alice", "bob")]
    for answer in answers:
        assert next(answer.response).startswith(b"retry:")
        assert next(answer.response).startswith(b"event: parts")
    assert sorted(cluster.polls.active().values()) == [1, 1]


def test_when_the_last_stream_of_a_job_closes_its_poller_stops(api: tuple[FakeApi, Cluster]):
    _, cluster = api
    client = create_app(cluster, PROXY).test_client()
    answers = [client.get(f"/stream/job/{MNIST}", headers=user(f"user-{i}")) for i in range(3)]
    for answer in answers:
        next(answer.response)
        next(answer.response)
    [poller] = cluster.polls.threads()
    for answer in answers[:2]:
        answer.close()
    assert list(cluster.polls.active().values()) == [1] and poller.is_alive()
    answers[2].close()
    assert cluster.polls.active() == {}
    assert settles(lambda: not poller.is_alive())


def test_one_user_past_their_stream_quota_is_refused_while_another_user_still_gets_a_stream(
    api: tuple[FakeApi, Cluster],
):
    _, cluster = api
    settings = replace(PROXY, max_streams=128, max_user_streams=64)
    client = create_app(cluster, settings).test_client()
    held = [client.get("/stream/list", headers=ALICE) for _ in range(64)]
    assert [a.status_code for a in held] == [200] * 64
    refused = client.get("/stream/list", headers=ALICE)
    assert refused.status_code == 429
    assert "you have 64 event streams open, the most one user may (64" in refused.text
    other = client.get("/stream/list", headers=user("bob"))
    assert other.status_code == 200
    for answer in [*held, other]:
        answer.close()


def test_the_per_user_stream_quota_is_read_from_the_environment_and_a_malformed_one_named():
    assert UiSettings().with_env({"TRAINOP_UI_MAX_USER_STREAMS": "4"}).max_user_streams == 4
    with pytest.raises(SettingError, match="TRAINOP_UI_MAX_USER_STREAMS"):
        UiSettings().with_env({"TRAINOP_UI_MAX_USER_STREAMS": "many"})


def test_a_closed_stream_gives_its_place_in_the_quota_back(api: tuple[FakeApi, Cluster]):
    _, cluster = api
    client = create_app(cluster, replace(PROXY, max_user_streams=1)).test_client()
    first = client.get("/stream/list", headers=ALICE)
    assert client.get("/stream/list", headers=ALICE).status_code == 429
    first.close()
    assert client.get("/stream/list", headers=ALICE).status_code == 200


def test_with_20000_events_in_the_namespace_a_page_fetches_only_its_jobs_a_page_at_a_time(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.events = [event(f"other-{i}", "Started", when=i % 3600) for i in range(20_000)]
    fake.events += [
        event("mnist", "Created", "PyTorchJob", "uid-mnist", when=1),
        event("mnist-worker-0", "Pulled", when=2),
    ]
    detail = cluster.detail(User("alice"), MNIST)
    assert detail is not None
    assert [(e.object, e.reason) for e in detail.events] == [
        ("PyTorchJob/mnist", "Created"), ("Pod/mnist-worker-0", "Pulled"),
    ]  # fmt: skip
    asked = [path for _, path, _ in fake.seen if "/events" in path]
    assert all("fieldSelector=involvedObject.namespace%3Dteam-a%2CinvolvedObject.name%3D" in p for p in asked)
    assert all(f"limit={EVENTS_PAGE}" in p for p in asked)
    assert fake.event_items == 2  # none of the other 20,000 crossed the wire


def test_an_object_with_many_events_is_read_page_by_page_up_to_a_bound_and_the_page_says_so(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.events = [
        event("mnist", f"Step{i}", "PyTorchJob", "uid-mnist", when=i) for i in range(EVENTS_PER_OBJECT + 50)
    ]
    detail = cluster.detail(User("alice"), MNIST)
    assert detail is not None
    assert len(detail.events) == EVENTS_PER_OBJECT
    assert f"only the first {EVENTS_PER_OBJECT} Events of mnist are shown" in detail.notes
    pages = [p for _, p, _ in fake.seen if "/events" in p and "involvedObject.name%3Dmnist%2C" in p]
    assert len(pages) == EVENTS_PER_OBJECT // EVENTS_PAGE
    assert fake.event_items == EVENTS_PER_OBJECT
