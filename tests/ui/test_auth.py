"""Who the UI acts as: the proxy's secret, the users and groups it will not impersonate, sign-in CSRF,
cookie flags and the bounded TokenReview memory; the pure rules first, then each attack through HTTP."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.ui.helpers import pytorch, with_status, write_run
from trainop.ui.app import create_app
from trainop.ui.auth import (
    MAX_CACHED,
    NEGATIVE_SECONDS,
    POSITIVE_SECONDS,
    PROXY_SECRET_ENV,
    UNKNOWN_REVIEWS_BURST,
    Authenticator,
    AuthSettings,
    Refused,
    TokenReviews,
    TooManyReviews,
    check_settings,
    from_the_proxy,
    impersonable_groups,
    impersonable_user,
)
from trainop.ui.bounded import Bucket, Expiring
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings
from trainop.ui.source import User

SECRET = "shared-with-the-proxy"
FROM_PROXY = {"X-Trainop-Proxy-Secret": SECRET}
PROXY = AuthSettings("proxy", "X-Forwarded-User", "X-Forwarded-Groups", proxy_secret=SECRET, groups=("ml",))
ALICE = User("alice", ("ml",), "alices-token")


class Clock:
    """A monotonic clock moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Reviewer:
    """The apiserver's TokenReview as the UI sees it: alice's token passes, every other is refused."""

    def __init__(self) -> None:
        self.reviews = 0
        self.valid = {"alices-token"}

    def __call__(self, token: str) -> User | None:
        self.reviews += 1
        return ALICE if token in self.valid else None


@pytest.fixture
def runs(tmp_path: Path) -> Runs:
    root = tmp_path / "runs"
    write_run(root, "secret-job", with_status(pytorch("secret-job", "kube-system"), ("Running", "R")))
    return Runs(root)


def proxy_client(runs: Runs, auth: AuthSettings = PROXY) -> FlaskClient:
    return create_app(runs, UiSettings(auth=auth, writable=True)).test_client()


def token_client(runs: Runs, reviewer: Callable[[str], User | None], **auth: object) -> FlaskClient:
    settings = AuthSettings("token", **auth)  # type: ignore[arg-type]
    return create_app(runs, UiSettings(auth=settings), Authenticator(settings, reviewer)).test_client()


def csrf_of(html: str) -> str:
    return html.split('name="csrf" value="', 1)[1].split('"', 1)[0]


# ---- the pure rules ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("sent", "secret", "ok"), [(SECRET, SECRET, True), ("", SECRET, False),
                                                    ("guess", SECRET, False), ("", "", False)])  # fmt: skip
def test_only_the_proxys_own_secret_proves_a_request_came_from_the_proxy(sent: str, secret: str, ok: bool):
    assert from_the_proxy(sent, secret) is ok


def test_proxy_mode_without_a_secret_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=f"set {PROXY_SECRET_ENV}"):
        check_settings(AuthSettings("proxy"))


@pytest.mark.parametrize("group", ["system:masters", "system:nodes", "system:authenticated"])
def test_a_system_group_among_those_to_impersonate_is_refused_at_start(group: str):
    with pytest.raises(ValueError, match=f"--impersonate-groups {group}: groups starting with system:"):
        check_settings(AuthSettings("proxy", proxy_secret=SECRET, groups=("ml", group)))


@pytest.mark.parametrize(
    "name", ["system:admin", "system:kube-controller-manager", "system:serviceaccount:kube-system:default"]
)
def test_no_system_user_is_impersonated(name: str):
    with pytest.raises(Refused, match=f"the proxy named the user '{name}'"):
        impersonable_user(name)


def test_groups_outside_the_allowed_list_are_left_out_and_reported():
    assert impersonable_groups(["ml", "admins", "ml", "ops"], ["ml", "ops"]) == (("ml", "ops"), ("admins",))


def test_a_system_group_from_the_proxy_refuses_the_request():
    with pytest.raises(Refused, match="'system:masters'"):
        impersonable_groups(["ml", "system:masters"], ["ml", "system:masters"])


def test_an_expiring_cache_never_holds_more_than_its_capacity():
    cache: Expiring[int, int] = Expiring(100)
    for i in range(10_000):
        cache.put(i, i, 60.0, 0.0)
    assert len(cache) == 100
    assert cache.get(9_999, 1.0) == (True, 9_999) and cache.get(0, 1.0) == (False, None)


def test_an_expiring_cache_forgets_an_entry_after_its_seconds():
    cache: Expiring[str, bool] = Expiring(10)
    cache.put("a", True, 5.0, 0.0)
    assert cache.get("a", 4.9) == (True, True)
    assert cache.get("a", 5.0) == (False, None) and len(cache) == 0


def test_an_expiring_cache_drops_expired_entries_when_a_new_one_is_put():
    cache: Expiring[int, bool] = Expiring(10)
    for i in range(5):
        cache.put(i, True, 1.0, 0.0)
    cache.put(99, True, 1.0, 2.0)
    assert len(cache) == 1


def test_a_bucket_allows_its_burst_then_its_rate():
    bucket = Bucket(per_second=2.0, burst=3)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.wait() == 1
    assert bucket.take(0.5) and not bucket.take(0.5)


def test_a_random_token_costs_one_review_per_negative_lifetime():
    clock, reviewer = Clock(), Reviewer()
    reviews = TokenReviews(reviewer, clock)
    for _ in range(100):
        assert reviews.user("random") is None
    assert reviewer.reviews == 1
    clock.now += NEGATIVE_SECONDS
    assert reviews.user("random") is None and reviewer.reviews == 2


def test_ten_thousand_random_tokens_cost_at_most_the_burst_of_reviews():
    clock, reviewer = Clock(), Reviewer()
    reviews = TokenReviews(reviewer, clock)
    limited = 0
    for _ in range(10_000):
        try:
            reviews.user(secrets.token_urlsafe(32))
        except TooManyReviews:
            limited += 1
    assert reviewer.reviews == UNKNOWN_REVIEWS_BURST
    assert limited == 10_000 - UNKNOWN_REVIEWS_BURST


def test_the_token_caches_stay_within_their_capacity_however_many_tokens_come():
    clock, reviewer = Clock(), Reviewer()
    reviews = TokenReviews(reviewer, clock, Bucket(per_second=1e9, burst=10**9), capacity=100)
    for _ in range(10_000):
        reviews.user(secrets.token_urlsafe(32))
    assert reviewer.reviews == 10_000
    assert len(reviews.refused) == 100 and len(reviews.passed) == 0


def test_the_authenticators_token_caches_hold_at_most_ten_thousand_answers_each():
    reviews = Authenticator(AuthSettings("token"), Reviewer()).reviews
    assert reviews is not None
    assert reviews.passed.capacity == reviews.refused.capacity == MAX_CACHED == 10_000


def test_a_known_token_is_reviewed_again_even_while_unknown_ones_are_limited():
    clock, reviewer = Clock(), Reviewer()
    reviews = TokenReviews(reviewer, clock, Bucket(per_second=0.001, burst=1))
    assert reviews.user("alices-token") == ALICE
    with pytest.raises(TooManyReviews):
        reviews.user("random")
    clock.now += POSITIVE_SECONDS
    assert reviews.user("alices-token") == ALICE and reviewer.reviews == 2


def test_a_revoked_token_is_refused_once_its_positive_answer_expires():
    clock, reviewer = Clock(), Reviewer()
    reviews = TokenReviews(reviewer, clock)
    assert reviews.user("alices-token") == ALICE
    reviewer.valid.clear()
    assert reviews.user("alices-token") == ALICE  # the answer is reused while it lives
    clock.now += POSITIVE_SECONDS
    assert reviews.user("alices-token") is None


# ---- the attacks, through HTTP ----------------------------------------------------------------------
def test_a_forged_user_header_without_the_proxys_secret_is_401_and_shows_nothing(runs: Runs):
    answer = proxy_client(runs).get("/", headers={"X-Forwarded-User": "cluster-admin"})
    assert answer.status_code == 401
    assert "secret-job" not in answer.text
    assert "did not come through the authenticating proxy" in answer.text


def test_a_forged_user_header_with_a_guessed_secret_is_401(runs: Runs):
    headers = {"X-Forwarded-User": "alice", "X-Trainop-Proxy-Secret": "guess"}
    answer = proxy_client(runs).get("/job/secret-job", headers=headers)
    assert answer.status_code == 401 and "secret-job" not in answer.text


def test_a_delete_with_a_forged_user_header_is_refused_and_deletes_nothing(runs: Runs):
    client = proxy_client(runs)
    answer = client.post("/action/delete/secret-job", headers={"X-Forwarded-User": "alice"})
    assert answer.status_code == 401
    assert "secret-job" in client.get("/", headers={**FROM_PROXY, "X-Forwarded-User": "alice"}).text


def test_the_group_system_masters_from_the_proxy_is_refused(runs: Runs):
    headers = {**FROM_PROXY, "X-Forwarded-User": "alice", "X-Forwarded-Groups": "ml,system:masters"}
    answer = proxy_client(runs).get("/", headers=headers)
    assert answer.status_code == 403
    assert "secret-job" not in answer.text and "&#39;system:masters&#39;" in answer.text


@pytest.mark.parametrize("name", ["system:admin", "system:serviceaccount:kube-system:default"])
def test_a_system_user_from_the_proxy_is_refused(runs: Runs, name: str):
    answer = proxy_client(runs).get("/", headers={**FROM_PROXY, "X-Forwarded-User": name})
    assert answer.status_code == 403 and "secret-job" not in answer.text


def test_groups_the_ui_does_not_impersonate_are_named_on_the_page(runs: Runs):
    headers = {**FROM_PROXY, "X-Forwarded-User": "alice", "X-Forwarded-Groups": "ml,admins"}
    page = proxy_client(runs).get("/", headers=headers).text
    assert "signed in as alice" in page and "not acting with groups: admins" in page


def test_a_sign_in_without_the_forms_csrf_token_is_refused_and_sets_no_cookie(runs: Runs):
    client = token_client(runs, Reviewer())
    answer = client.post("/signin", data={"token": "attackers-token"})
    assert answer.status_code == 403 and "CSRF check" in answer.text
    assert not [c for c in answer.headers.getlist("Set-Cookie") if c.startswith("trainop_token=")]


def test_a_sign_in_from_another_origin_is_refused_even_with_the_token(runs: Runs):
    client = token_client(runs, Reviewer())
    csrf = csrf_of(client.get("/signin").text)
    answer = client.post(
        "/signin", data={"token": "attackers-token", "csrf": csrf}, headers={"Origin": "https://evil.example"}
    )
    assert answer.status_code == 403


def sign_in(client: FlaskClient, **request: object) -> list[str]:
    """The Set-Cookie lines of a sign-in through the page's own form."""
    csrf = csrf_of(client.get("/signin", **request).text)  # type: ignore[arg-type]
    answer = client.post("/signin", data={"token": "alices-token", "csrf": csrf}, **request)  # type: ignore[arg-type]
    assert answer.status_code == 303
    return answer.headers.getlist("Set-Cookie")


def test_a_sign_in_through_the_form_sets_an_http_only_strict_cookie_and_lets_alice_in(runs: Runs):
    client = token_client(runs, Reviewer())
    (cookie,) = [c for c in sign_in(client) if c.startswith("trainop_token=")]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    assert "signed in as alice" in client.get("/").text


def test_cookies_are_secure_when_the_proxy_says_the_request_came_over_https(runs: Runs):
    cookies = sign_in(token_client(runs, Reviewer()), headers={"X-Forwarded-Proto": "https"})
    assert cookies and all("Secure" in c and "HttpOnly" in c for c in cookies)


def test_a_sign_in_through_a_proxy_that_terminates_tls_passes_the_origin_check(runs: Runs):
    tls = {"Origin": "https://localhost", "X-Forwarded-Proto": "https"}
    cookies = sign_in(token_client(runs, Reviewer()), headers=tls)
    assert any(c.startswith("trainop_token=") for c in cookies)


def test_a_sign_in_from_another_host_on_the_same_scheme_is_refused(runs: Runs):
    client = token_client(runs, Reviewer())
    csrf = csrf_of(client.get("/signin").text)
    answer = client.post(
        "/signin",
        data={"token": "attackers-token", "csrf": csrf},
        headers={"Origin": "http://localhost.evil"},
    )
    assert answer.status_code == 403


def test_cookies_are_secure_on_a_request_over_https(runs: Runs):
    cookies = sign_in(token_client(runs, Reviewer()), base_url="https://localhost")
    assert cookies and all("Secure" in c for c in cookies)


def test_cookies_are_secure_on_every_answer_when_told_to(runs: Runs):
    cookies = sign_in(token_client(runs, Reviewer(), secure_cookies=True))
    assert cookies and all("Secure" in c for c in cookies)


def test_ten_thousand_random_bearer_tokens_cost_a_bounded_number_of_reviews(runs: Runs):
    reviewer = Reviewer()
    settings = AuthSettings("token")
    authenticator = Authenticator(settings, reviewer, Clock())  # the flood arrives within one instant
    client = create_app(runs, UiSettings(auth=settings), authenticator).test_client()
    statuses: dict[int, int] = {}
    for _ in range(10_000):
        answer = client.get("/", headers={"Authorization": f"Bearer {secrets.token_urlsafe(24)}"})
        statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
    assert reviewer.reviews == UNKNOWN_REVIEWS_BURST
    assert statuses == {401: UNKNOWN_REVIEWS_BURST, 429: 10_000 - UNKNOWN_REVIEWS_BURST}
    assert authenticator.reviews is not None and len(authenticator.reviews.refused) == UNKNOWN_REVIEWS_BURST


def test_a_flood_of_unknown_tokens_is_answered_429_with_when_to_retry(runs: Runs):
    settings = AuthSettings("token")
    authenticator = Authenticator(settings, Reviewer(), Clock())
    client = create_app(runs, UiSettings(auth=settings), authenticator).test_client()
    for i in range(UNKNOWN_REVIEWS_BURST):
        client.get("/", headers={"Authorization": f"Bearer t{i}"})
    answer = client.get("/", headers={"Authorization": "Bearer one-more"})
    assert answer.status_code == 429 and answer.headers["Retry-After"] == "1"
    assert "too many sign-ins with new tokens right now" in answer.text
