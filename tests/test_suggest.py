"""'Did you mean' for names people type: kinds, replica types, examples."""

from __future__ import annotations

from trainop.suggest import closest, did_you_mean

KINDS = ["TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "PaddleJob", "MXJob", "JAXJob"]


def test_a_name_in_the_wrong_case_means_the_listed_one() -> None:
    assert closest("PytorchJob", KINDS) == "PyTorchJob"


def test_a_misspelling_means_the_closest_name() -> None:
    assert closest("Workers", ["Master", "Worker"]) == "Worker"
    assert closest("pytorh", ["jax", "pytorch", "pytorch-dra", "tensorflow"]) == "pytorch"


def test_a_name_close_to_nothing_suggests_nothing() -> None:
    assert closest("zzz", ["Master", "Worker"]) is None
    assert did_you_mean("zzz", ["Master", "Worker"]) == ""


def test_the_suggestion_quotes_the_name() -> None:
    assert did_you_mean("Workers", ["Master", "Worker"]) == '; did you mean "Worker"?'


def test_a_listed_name_gets_no_suggestion() -> None:
    assert did_you_mean("Worker", ["Master", "Worker"]) == ""
