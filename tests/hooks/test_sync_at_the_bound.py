"""The largest job of every kind admission accepts syncs with all its children observed as the apiserver
returns them, in-process and through gunicorn with the shipped configuration and budget; a hostile body
of the same size is refused with a 413 (hooks/bodycost.py, docs/limits.md)."""

from __future__ import annotations

import http.client
import logging
from collections.abc import Iterator

import orjson
import pytest

from hooks.app import create_app
from tests.builders import T0
from tests.largest_jobs import largest_job, most_workers, realistic_job, resync_body
from tests.servers import Server, serve
from trainop.frameworks import KINDS
from trainop.jsoncost import leading_member
from trainop.jsontypes import Json

logging.getLogger("trainop.hooks").setLevel(logging.CRITICAL)


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve("hooks", tmp_path_factory.mktemp("hooks")) as server:
        yield server


def post(server: Server, body: bytes) -> tuple[int, Json]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request("POST", "/sync", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, orjson.loads(response.read())
    finally:
        conn.close()


def running(answer: Json) -> bool:
    return any(
        c["type"] == "Running" and c["status"] == "True" for c in answer["status"].get("conditions", [])
    )


def children_after_the_job(body: bytes) -> bytes:
    """`,"children":{...}}`: the body's bytes after its job."""
    head = leading_member(body, "parent", (), len(body))
    assert head is not None
    return body[head[1] :]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_largest_admissible_job_syncs_and_a_hostile_body_of_its_size_is_refused(
    kind: str, hooks: Server
) -> None:
    parent = largest_job(kind)
    body = resync_body(parent, T0)
    observed = sum(len(g) for g in orjson.loads(body)["children"].values())

    response = create_app(clock=lambda: T0).test_client().post("/sync", data=body)
    assert response.status_code == 200, response.get_json()
    answer = response.get_json()
    assert running(answer) and len(answer["children"]) == observed
    del response, answer

    try:
        status, answer = post(hooks, body)
    except http.client.RemoteDisconnected:
        raise AssertionError(hooks.log.read_text()[-3000:]) from None
    assert status == 200, answer
    assert running(answer) and len(answer["children"]) == observed
    del answer

    # The same bytes spent on empty arrays.
    job_bytes = orjson.dumps(parent)
    filler = len(body) - len(job_bytes) - 40
    hostile = b'{"parent":' + job_bytes + b',"children":{"Pod.v1":{"p":[' + b"[]," * (filler // 3) + b"[]]}}}"
    status, answer = post(hooks, hostile)
    assert status == 413 and "more than the" in answer["error"], answer

    # The same children for a job of a tenth of the Workers: ten times the children it implies.
    small = orjson.dumps(realistic_job(kind, max(1, most_workers(kind) // 10)))
    hostile = b'{"parent":' + small + children_after_the_job(body)
    del body
    status, answer = post(hooks, hostile)
    assert status == 413, answer
    assert "children" in answer["error"] or "parses at once" in answer["error"], answer
