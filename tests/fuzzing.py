"""Hostile but structurally valid request bodies for the servers' fuzz suites.

A body starts from a real request (a Metacontroller hook call, an AdmissionReview) and has one to three
nodes, at any depth including the root, replaced by something hostile: the wrong JSON type, a huge string
or list, nesting thousands deep, NaN, infinities or integers far past 64 bits, and unicode that includes
lone surrogates, NULs and right-to-left marks. Some of that is not valid JSON at all (NaN, lone
surrogates, nesting past the parser's limit): the server must answer 400 for it, not fail.

`TRAINOP_FUZZ_EXAMPLES` sets the examples per suite (200 by default; `make fuzz` runs 10,000).

Two hypothesis profiles (tests/conftest.py registers them and loads ``repeatable`` for every run):

* ``repeatable``, the default of every run (the bare run, `make unit`, `make fuzz`, CI): derandomized
  (hypothesis seeds each test from a hash of the test itself), no example database, no deadline and no
  too-slow health check. The same commit therefore draws the same examples and gives the same verdict on
  any machine and under any load, as long as hypothesis is the pinned version (pyproject.toml): a new
  version may draw other examples, so it is upgraded in a commit of its own that the gate judges.

A fixed seed alone is not enough: the examples must also not depend on what else the process imported or
collected (one file alone, `make fuzz`'s groups, the bare run's hundreds of modules). Three things keep
them a function of the test:

* Hypothesis now and then draws a literal lifted from the source of every imported module outside
  site-packages, the standard library and test folders, so a property drew other examples once another
  module had been imported. Under ``repeatable`` tests/conftest.py keeps that pool empty (and fails at
  start-up if a hypothesis upgrade removes what it replaces); explore keeps it.
* The seeds and every value a strategy samples are built from fixed data: no uuid4, clock or random
  module (an AdmissionReview's uid is a hash of what it reviews), lists rather than sets, nothing filled
  in by other modules' imports.
* tests/test_fuzz_determinism.py draws a few examples of each hooks and webhooks property alone, after
  importing every module of trainop, hooks and webhooks, and beside tests/ui, and fails unless the three
  runs drew the same examples (tests/drawlog.py records them).
* ``explore`` (`make explore`, never part of `make all` or CI): fresh random examples in rounds until a
  time budget runs out (`TRAINOP_EXPLORE_SECONDS`, 300 by default), with hypothesis's example database
  in `.hypothesis/` on, so a failure found once is replayed first by every later explore run on that
  machine.

A bug that explore finds becomes an explicit regression example, so that the repeatable gate checks it
on every machine from then on, before or with its fix:

1. Take the failing body from the report's "Falsifying example:" lines (hypothesis shrinks it first);
   `encode(body)` shows its JSON text.
2. Either put it on the property itself, above `@given`, as
   ``@example(body=..., ascii_only=False)`` (the same keywords as `@given`), or, better when the bug has
   a name, write a test of its own next to the property that posts that body and asserts the exact
   answer (tests/hooks/test_fuzz_hostile.py has both for one bug: the `@example`s of
   `PLANTED_IN_A_FINISHED_JOB` and `test_planted_status_keys_are_not_echoed`).
3. See the new example fail, fix the code, see it pass. The database entry in `.hypothesis/` is then
   redundant; nothing in the repository depends on it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("TRAINOP_FUZZ_EXAMPLES", "200"))
# Derandomization and the example database come from the profile; only the volume is set here.
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@dataclass(frozen=True)
class Raw:
    """JSON text spliced in verbatim: what json.dumps cannot or will not write (deep nesting, 1e999)."""

    text: str


NASTY_STRINGS = [
    "",
    "\x00",
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    "\udfff\ud800",
    "\u202eevil",  # right-to-left override
    "\ufeff",
    "😀" * 64,
    "a\nb\r\nc",
    "../../etc/passwd",
    "${jndi:ldap://x}",
    "%s%n%x",
    "Worker",
    "Pod.v1",
    "True",
    "2024-05-01T12:00:00Z",
    "9999-99-99T99:99:99Z",
]
HUGE_NUMBERS = [
    Raw("1" + "0" * 400),
    Raw("-" + "9" * 40),
    Raw("1e999"),
    Raw("-1e999"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-0.0"),
    Raw("5e-324"),
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    1.7976931348623157e308,
]


def _nested(depth: int, in_objects: bool) -> Raw:
    if in_objects:
        return Raw('{"a":' * depth + "0" + "}" * depth)
    return Raw("[" * depth + "]" * depth)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(NASTY_STRINGS),
    st.sampled_from(HUGE_NUMBERS),
)
huge = st.one_of(
    st.builds(
        lambda n, c: c * n, st.sampled_from([4_096, 65_536, 262_144]), st.sampled_from(["x", "é", "😀"])
    ),
    st.builds(lambda n, v: [v] * n, st.sampled_from([1_000, 5_000]), st.sampled_from([0, "w", None])),
    st.builds(lambda n: [{} for _ in range(n)], st.sampled_from([1_000, 5_000])),
    st.builds(
        lambda n: {f"k{i}": i for i in range(n)},
        st.sampled_from([500, 2_000]),
    ),
    st.builds(_nested, st.sampled_from([64, 600, 5_000]), st.booleans()),
)
hostile_values = st.one_of(
    scalars,
    huge,
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=10,
    ),
)


def _walk(draw: st.DrawFn, node: Any) -> tuple[Any, ...]:
    """A location in `node`: from the root, each step goes one level down with probability 3/4."""
    path: list[Any] = []
    while isinstance(node, dict | list) and node and draw(st.integers(0, 3)) > 0:
        # The first 32 entries only: a huge planted container need not be walked into everywhere.
        key = draw(st.sampled_from(list(node)[:32] if isinstance(node, dict) else range(min(len(node), 32))))
        path.append(key)
        node = node[key]
    return tuple(path)


@st.composite
def hostile_bodies(draw: st.DrawFn, seeds: list[Any]) -> Any:
    """A seed with one to three nodes replaced, deleted, or given a hostile extra key."""
    body: Any = orjson.loads(orjson.dumps(draw(st.sampled_from(seeds))))  # a deep copy, 20x faster
    for _ in range(draw(st.integers(1, 3))):
        path = _walk(draw, body)
        value = draw(hostile_values)
        if not path:
            body = value
            continue
        parent = body
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.sampled_from([*NASTY_STRINGS, "spec", "status", "metadata"]))] = value
        else:
            parent[path[-1]] = value
    return body


def encode(body: Any, ascii_only: bool = False) -> bytes:
    """JSON text of `body` with each Raw spliced in as it is; lone surrogates come out as \\ud800 escapes."""
    raws: list[str] = []

    def placeholder(obj: Any) -> str:
        if not isinstance(obj, Raw):
            raise TypeError(f"{type(obj).__name__} is not JSON")
        raws.append(obj.text)
        return f"\x00raw{len(raws) - 1}\x00"

    text = json.dumps(body, ensure_ascii=ascii_only, allow_nan=True, default=placeholder)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{i}\x00", ensure_ascii=ascii_only), raw, 1)
    return text.encode("utf-8", errors="surrogatepass")
