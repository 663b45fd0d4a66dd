"""The examples shipped in the package: each one's document is its scripts' ConfigMap then its job, the job
runs only scripts the ConfigMap holds from the framework's generic image, and the webhooks would admit it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from trainop.admission.admit import admit
from trainop.examples import UnknownExampleError, example, names
from trainop.frameworks import kind_info
from trainop.install.schema import schema_errors
from trainop.local.manifest import as_created, parse

Json = dict[str, Any]
REPO = Path(__file__).resolve().parents[1]
FOLDERS = REPO / "trainop" / "examples"
IMAGES = REPO / "training-images"
NAMES = names()


def documents(name: str) -> tuple[Json, Json]:
    config_map, job = (d for d in yaml.safe_load_all(example(name).document) if d is not None)
    return config_map, job


def containers(job: Json) -> list[Json]:
    specs = job["spec"][kind_info(job["kind"]).replica_field].values()
    return [c for rspec in specs for c in rspec["template"]["spec"]["containers"]]


def test_every_folder_with_a_job_is_an_example() -> None:
    assert sorted(p.parent.name for p in FOLDERS.glob("*/job.yaml")) == NAMES
    assert {"pytorch", "tensorflow", "xgboost", "mpi", "paddle", "jax", "mxnet"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_an_example_has_a_kind_and_a_one_line_description(name: str) -> None:
    found = example(name)
    assert found.kind == documents(name)[1]["kind"]
    assert 20 <= len(found.description) <= 100, found.description
    assert found.document.startswith(f"# {found.description}\n")


@pytest.mark.parametrize("name", NAMES)
def test_the_config_map_holds_every_script_of_the_folder_unchanged(name: str) -> None:
    config_map, _ = documents(name)
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    scripts = {p.name: p.read_text() for p in (FOLDERS / name).iterdir() if p.suffix == ".py"}
    assert scripts and config_map["data"] == scripts


@pytest.mark.parametrize("name", NAMES)
def test_every_replica_mounts_the_config_map_and_runs_only_scripts_it_holds(name: str) -> None:
    config_map, job = documents(name)
    for rspec in job["spec"][kind_info(job["kind"]).replica_field].values():
        pod = rspec["template"]["spec"]
        mounted = {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v}
        for c in pod["containers"]:
            mounts = {m["mountPath"]: mounted[m["name"]] for m in c["volumeMounts"]}
            assert set(mounts.values()) == {config_map["metadata"]["name"]}
            for path in re.findall(r"/\S+\.py", " ".join(c.get("command", []) + c.get("args", []))):
                folder, _, script = path.rpartition("/")
                assert folder in mounts and script in config_map["data"], path


@pytest.mark.parametrize("name", NAMES)
def test_every_image_is_a_generic_framework_image_the_image_build_makes(name: str) -> None:
    for c in containers(documents(name)[1]):
        match = re.fullmatch(r"trainop-examples/([a-z0-9-]+):latest", c["image"])
        assert match, c["image"]
        assert (IMAGES / match[1] / "requirements.txt").is_file(), f"no training-images/{match[1]}/"


@pytest.mark.parametrize("name", NAMES)
def test_the_webhooks_admit_the_example_and_its_schema_holds(name: str) -> None:
    job = documents(name)[1]
    admission = admit(as_created(job, datetime.now(UTC)))
    assert admission.checks.ok, admission.checks.message
    # No warning of its own: only what every job of its kind gets (MXJob's deprecation).
    types = {t: 1 for t in job["spec"][kind_info(job["kind"]).replica_field]}
    plain = admit(as_created(builders.job(job["kind"], **types), datetime.now(UTC)))
    assert admission.checks.warnings == plain.checks.warnings
    assert schema_errors(admission.job) == []


@pytest.mark.parametrize("name", NAMES)
def test_trainop_run_reads_the_document_as_one_job_and_its_config_map(name: str) -> None:
    config_map, job = documents(name)
    manifest = parse(example(name).document, f"example:{name}")
    assert manifest.job == job
    assert manifest.config_maps == {config_map["metadata"]["name"]: config_map}


def test_an_unknown_example_lists_the_known_ones() -> None:
    with pytest.raises(UnknownExampleError) as err:
        example("tensorflo")
    assert str(err.value) == f"no example named 'tensorflo'; the examples are: {', '.join(NAMES)}"
