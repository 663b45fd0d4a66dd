"""Bounds on every Event a sync implies (trainop.job.event): part of an event's text comes from the
request (a pod's waiting message, a field quoted by validation), so none may be large or unprintable."""

from __future__ import annotations

from tests.builders import job
from tests.controller.fakes import Cluster
from trainop.job.event import MAX_MESSAGE_BYTES, Event


def event(message: str = "m", reason: str = "Reason", occurrence: str = "o") -> Event:
    return Event("Warning", reason, message, occurrence)


def test_a_message_within_1_kib_is_kept_as_it_is() -> None:
    message = "Error pod j-worker-0 container pytorch waiting message: Back-off pulling image" + "x" * 900
    assert event(message).message == message


def test_a_message_over_1_kib_is_cut_to_1_kib_ending_in_an_ellipsis() -> None:
    cut = event("x" * 1_400_094).message
    assert len(cut.encode()) == MAX_MESSAGE_BYTES
    assert cut.endswith("x...")


def test_a_message_is_cut_between_characters_not_inside_one() -> None:
    cut = event("é" * 600).message  # 1200 bytes of two-byte characters
    assert cut == "é" * 510 + "..."


def test_newlines_and_tabs_stay_as_a_termination_message_has_them() -> None:
    assert event("Traceback:\n\tline 1\n").message == "Traceback:\n\tline 1\n"


def test_terminal_escapes_and_bidi_overrides_become_spaces() -> None:
    assert event("red \x1b[31m text \u202eevil\r").message == "red  [31m text  evil "


def test_a_long_occurrence_is_replaced_by_its_digest() -> None:
    occurrence = event(occurrence="u" * 10_000).occurrence
    assert occurrence.startswith("sha256:")
    assert len(occurrence) == len("sha256:") + 64


def test_kubeflows_and_the_kubelets_reasons_are_well_formed() -> None:
    reasons = ("ServiceAccount is exist", "ImagePullBackOff", "mpijobsSucceeded", "OOMKilled", "")
    assert all(event(reason=r).well_formed for r in reasons)


def test_a_reason_over_128_characters_is_not_well_formed() -> None:
    assert event(reason="R" * 128).well_formed
    assert not event(reason="R" * 129).well_formed


def waiting_pod_events(reason: str, message: str) -> list[Event]:
    """The events of a sync whose observed worker pod waits with `reason` and `message`."""
    cluster = Cluster(job("PyTorchJob", name="j", namespace="ns", Master=1, Worker=1))
    cluster.sync()
    state = {"waiting": {"reason": reason, "message": message}}
    cluster.pod("j-worker-0")["status"] = {
        "phase": "Pending",
        "containerStatuses": [{"name": "pytorch", "restartCount": 0, "state": state}],
    }
    return [e for e in cluster.sync(1).events if e.type == "Warning"]


def test_a_pod_whose_reason_is_not_a_word_implies_no_event() -> None:
    assert waiting_pod_events("<b>Pwned</b>\n", "Back-off pulling image") == []


def test_a_pods_oversized_waiting_message_implies_a_bounded_event() -> None:
    [warning] = waiting_pod_events("ImagePullBackOff", "y" * 1_400_000)
    assert warning.message.startswith("Error pod j-worker-0 container pytorch waiting message: yyy")
    assert len(warning.message.encode()) == MAX_MESSAGE_BYTES
