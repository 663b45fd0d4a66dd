"""The registry of `trainop.dev/` annotations: what admission does with them, and with jobs without them."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from tests.builders import job
from trainop import extensions
from trainop.admission.admit import admit
from trainop.admission.defaults import apply_defaults
from trainop.controller.sync import sync
from trainop.extensions.base import Extension
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.frameworks import KINDS
from trainop.job.settings import Settings
from trainop.jsontypes import Json

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def every_replica_type(kind: str) -> dict[str, int]:
    return {rtype: 1 for rtype in KINDS[kind].replica_types}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("annotations", [None, {}, {"example.com/team": "vision"}])
def test_a_job_without_our_annotations_is_defaulted_byte_for_byte_as_without_extensions(
    kind: str, annotations: dict[str, str] | None
) -> None:
    plain = job(kind, **every_replica_type(kind))
    if annotations is not None:
        plain["metadata"]["annotations"] = annotations
    before = copy.deepcopy(plain)

    admitted = admit(plain).job

    assert orjson.dumps(admitted) == orjson.dumps(apply_defaults(before))
    assert plain == before


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_extension_step_returns_a_job_without_our_annotations_as_the_very_same_object(kind: str) -> None:
    defaulted = apply_defaults(job(kind, **every_replica_type(kind)))

    assert extensions.resolve(defaulted) == (defaulted, extensions.NONE)
    assert extensions.resolve(defaulted)[0] is defaulted


def test_an_unknown_trainop_annotation_is_refused_with_the_known_ones() -> None:
    unknown = job("PyTorchJob", Master=1, Worker=1)
    unknown["metadata"]["annotations"] = {"trainop.dev/acelerator.Worker": "nvidia-gke-l4"}

    message = admit(unknown).checks.message

    assert message.startswith("metadata.annotations[trainop.dev/acelerator.Worker]: Unsupported value: ")
    assert "the known annotations are trainop.dev/accelerator.<ReplicaType>" in message


def test_annotations_of_other_prefixes_are_not_ours_to_judge() -> None:
    other = job("PyTorchJob", Master=1, Worker=1)
    other["metadata"]["annotations"] = {"trainop.dev.example.com/x": "1", "sidecar.istio.io/inject": "false"}

    assert admit(other).checks.ok


def test_a_non_string_annotation_value_is_refused() -> None:
    # The apiserver never stores one; a job sent straight to a hook or `trainop run` may carry one.
    odd = job("PyTorchJob", Master=1, Worker=1)
    odd["metadata"]["annotations"] = {"trainop.dev/accelerator.Worker": 2}

    message = admit(odd).checks.message

    path = "metadata.annotations[trainop.dev/accelerator.Worker]"
    assert message == f"{path}: Invalid value: 2: annotation values are strings"


def test_an_update_that_changes_only_our_annotations_is_validated() -> None:
    old = job("PyTorchJob", Master=1, Worker=1)
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {"trainop.dev/accelerator.Worker": "no-such-profile"}

    assert not admit(new, old).checks.ok


def test_an_update_of_other_metadata_skips_validation_as_before() -> None:
    old = job("PyTorchJob", Master=1, Worker=1)
    old["metadata"]["annotations"] = {"trainop.dev/accelerator.Worker": "no-such-profile"}
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "vision"}

    assert admit(new, old).checks.ok


def test_the_readme_annotation_table_is_generated_from_the_registry() -> None:
    text = (REPO / "README.md").read_text()
    start, end = text.index(extensions.README_BEGIN), text.index(extensions.README_END)

    assert text[start : end + len(extensions.README_END)] == extensions.readme_table()


def test_the_readme_generator_reports_a_current_table() -> None:
    done = subprocess.run(
        [sys.executable, "hack/annotations.py"], cwd=REPO, capture_output=True, text=True, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr


def test_every_documented_annotation_is_under_our_prefix() -> None:
    assert all(doc.key.startswith(extensions.PREFIX) for doc in extensions.docs())


class CountingRegistry(tuple[Extension, ...]):
    """The registry, counting how often a step walks it."""

    walks = 0

    def __iter__(self) -> Iterator[Extension]:
        type(self).walks += 1
        return super().__iter__()


def every_extension_tfjob() -> Json:
    """A TFJob that every extension applies to: TensorBoard, JSON logs, placement, an accelerator and the
    default server on its parameter server."""
    tf = job("TFJob", name="j", Chief=1, Worker=2, PS=1)
    tf["metadata"]["annotations"] = {
        "trainop.dev/tensorboard": "s3://runs/j",
        "trainop.dev/log-format": "json",
        "trainop.dev/placement.Worker": "spread-preferred",
        "trainop.dev/accelerator.Worker": "nvidia-gke-l4",
        "trainop.dev/default-server.PS": "tensorflow",
    }
    tf["spec"]["runPolicy"] = {"cleanPodPolicy": "Running"}
    return tf


def test_one_sync_walks_the_extension_registry_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tf = every_extension_tfjob()
    # The pods mount the job's ConfigMaps, so they are built once those are observed as the job's.
    owner = {"uid": "uid-j", "controller": True}
    maps = {
        o["metadata"]["name"]: {**o, "metadata": {**o["metadata"], "ownerReferences": [owner]}}
        for o in sync(tf, {}, Settings(), T0).children
        if o["kind"] == "ConfigMap"
    }
    first = sync(tf, {"ConfigMap.v1": maps}, Settings(), T0)
    pods = {o["metadata"]["name"]: o for o in first.children if o["kind"] == "Pod"}
    assert len(pods) == 4 and all(p["spec"]["volumes"] for p in pods.values())
    # The parameter server's default server found no TensorFlow: the failure path asks the extensions too.
    failed = {
        **pods["j-ps-0"],
        "metadata": {**pods["j-ps-0"]["metadata"], "uid": "p", "ownerReferences": [{"uid": "uid-j"}]},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "tensorflow", "state": {"terminated": {"exitCode": NO_TENSORFLOW}}}
            ],
        },
    }
    observed = {"Pod.v1": {"j-ps-0": failed}}
    monkeypatch.setattr(extensions, "EXTENSIONS", CountingRegistry(extensions.EXTENSIONS))

    for children in ({}, observed):
        CountingRegistry.walks = 0
        result = sync(copy.deepcopy(tf), children, Settings(), T0)
        assert CountingRegistry.walks == 1, children.keys()

    assert "has no TensorFlow" in next(
        c["message"] for c in result.status["conditions"] if c["type"] == "Failed"
    )
