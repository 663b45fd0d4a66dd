"""`trainop run` takes exactly one kubeflow.org job per file and says plainly when a file is not that."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainop.local.manifest import ManifestError, as_created, load, parse

JOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: mnist}
spec: {}
"""


def test_one_job_is_read_as_written() -> None:
    assert parse(JOB)["metadata"] == {"name": "mnist"}


def test_empty_documents_around_the_job_are_ignored() -> None:
    assert parse(f"---\n{JOB}\n---\n")["kind"] == "PyTorchJob"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no document; expected one job (kinds: TFJob, PyTorchJob"),
        ("- a\n- b\n", "document 1 has no kind"),
        ("kind: [", "not valid YAML"),
        (f"{JOB}\n---\n{JOB.replace('mnist', 'other')}", "holds 2 jobs (PyTorchJob/mnist, PyTorchJob/other)"),
        ("apiVersion: v1\nkind: ConfigMap\n", "document 1: unknown kind 'ConfigMap'; expected one of TFJob"),
    ],
)
def test_files_that_are_not_one_job_are_rejected_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(text, "job.yaml")
    assert str(err.value).startswith("job.yaml: ")
    assert message in str(err.value)


def test_a_missing_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load(tmp_path / "absent.yaml")


def test_relative_paths_resolve_against_the_folder_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    assert load(tmp_path / "job.yaml").base_dir == tmp_path.resolve()


def test_created_jobs_get_what_the_apiserver_fills_in() -> None:
    job = as_created(parse(JOB), datetime(2024, 5, 1, tzinfo=UTC))
    meta = job["metadata"]
    assert (meta["name"], meta["namespace"], meta["creationTimestamp"]) == (
        "mnist",
        "default",
        "2024-05-01T00:00:00Z",
    )
    assert meta["uid"]


def test_generate_name_gets_a_random_suffix() -> None:
    job = as_created(parse(JOB.replace("name: mnist", "generateName: run-")), datetime.now(UTC))
    assert job["metadata"]["name"].startswith("run-") and len(job["metadata"]["name"]) == 9
