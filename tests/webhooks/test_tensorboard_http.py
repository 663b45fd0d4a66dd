"""TensorBoard's keep-after through /validate, as the apiserver calls it: bounded at 30 days, with the
annotation, the bound and the fix in the denial."""

from __future__ import annotations

from flask.testing import FlaskClient

from tests.builders import job
from tests.webhooks.helpers import denial, validated
from trainop.jsontypes import Json

TB = "trainop.dev/tensorboard"
KEEP_AFTER = f"{TB}.keep-after"


def board_job(keep_after: str) -> Json:
    obj = job("PyTorchJob", name="j", Master=1, Worker=2)
    obj["metadata"]["annotations"] = {TB: "s3://experiments/run-7", KEEP_AFTER: keep_after}
    return obj


def test_validate_denies_a_keep_after_beyond_30_days_naming_the_annotation_bound_and_fix(
    client: FlaskClient,
) -> None:
    message = denial(client, board_job("999999d"))
    assert f'metadata.annotations[{KEEP_AFTER}]: Invalid value: "999999d": at most 30d (720h)' in message
    assert 'give a shorter one, e.g. "7d"' in message


def test_validate_admits_a_keep_after_of_30_days(client: FlaskClient) -> None:
    assert validated(client, board_job("30d"))["allowed"] is True


def test_validate_denies_a_malformed_keep_after_saying_the_form(client: FlaskClient) -> None:
    message = denial(client, board_job("1 week"))
    assert (
        f'metadata.annotations[{KEEP_AFTER}]: Invalid value: "1 week": a whole number with s, m, h or d'
        in message
    )
