"""hooks.ratelimit.Buckets: client-go's token bucket per key."""

from __future__ import annotations

from datetime import datetime, timedelta

from hooks.ratelimit import Buckets
from tests.builders import T0

NOW = T0


def takes(buckets: Buckets, key: str, count: int, now: datetime = NOW) -> list[bool]:
    return [buckets.take(key, now) for _ in range(count)]


def test_a_full_bucket_gives_its_burst_then_refuses() -> None:
    assert takes(Buckets(3, 300), "a", 4) == [True, True, True, False]


def test_one_token_comes_back_per_refill_period() -> None:
    buckets = Buckets(3, 300)
    takes(buckets, "a", 3)
    later = NOW + timedelta(seconds=300)
    assert takes(buckets, "a", 2, later) == [True, False]


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    buckets = Buckets(2, 1)
    buckets.take("a", NOW)
    assert takes(buckets, "a", 3, NOW + timedelta(days=1)) == [True, True, False]


def test_keys_have_buckets_of_their_own() -> None:
    buckets = Buckets(1, 300)
    assert (buckets.take("a", NOW), buckets.take("b", NOW), buckets.take("a", NOW)) == (True, True, False)


def test_a_clock_going_back_refills_nothing() -> None:
    buckets = Buckets(1, 300)
    buckets.take("a", NOW)
    assert not buckets.take("a", NOW - timedelta(hours=1))


def test_beyond_its_size_the_least_recently_used_key_is_forgotten_and_starts_full() -> None:
    buckets = Buckets(1, 300, size=2)
    for key in ("a", "b", "c"):  # c evicts a
        buckets.take(key, NOW)
    assert (buckets.take("a", NOW), buckets.take("c", NOW)) == (True, False)
