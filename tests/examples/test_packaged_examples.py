"""The examples shipped in the package: each one's document is its scripts' ConfigMap, any object its job
needs, then its job; the job runs only scripts the ConfigMap holds from the framework's generic image, and
the webhooks would admit it. One PyTorch example per shipped accelerator profile, and one with DRA claims."""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests import builders
from trainop import examples as packaged
from trainop.admission.admit import admit
from trainop.api import devices
from trainop.examples import SCRIPTS_FROM, UnknownExampleError, example, names
from trainop.extensions.accelerators import builtin_profiles, builtin_profiles_text
from trainop.extensions.parameterserver import ANNOTATION as DEFAULT_SERVER
from trainop.frameworks import kind_info
from trainop.install.schema import schema_errors
from trainop.jsontypes import Json
from trainop.local.manifest import NO_DRA, ManifestError, as_created, parse

REPO = Path(__file__).resolve().parents[2]
FOLDERS = REPO / "trainop" / "examples"
IMAGES = REPO / "training-images"
NAMES = names()
PROFILES = builtin_profiles()
# The profiles as docs/accelerators.md documents them: what the webhook writes, field by field.
DOCUMENTED = yaml.safe_load(builtin_profiles_text())
DRA = "pytorch-dra"
# The examples `trainop run` runs here: all but the one whose pods claim devices through DRA.
LOCAL = [n for n in NAMES if n != DRA]


def all_documents(name: str) -> list[Json]:
    return [d for d in yaml.safe_load_all(example(name).document) if d is not None]


def documents(name: str) -> tuple[Json, Json]:
    """(the scripts' ConfigMap, the job): the first and the last document."""
    docs = all_documents(name)
    return docs[0], docs[-1]


def scripts_folder(name: str) -> Path:
    """The folder whose scripts the example ships: its own, or the one its scripts-from names."""
    source = FOLDERS / name / SCRIPTS_FROM
    return FOLDERS / source.read_text().strip() if source.is_file() else FOLDERS / name


def pod_specs(job: Json) -> dict[str, Json]:
    specs = job["spec"][kind_info(job["kind"]).replica_field]
    return {rtype: rspec["template"]["spec"] for rtype, rspec in specs.items()}


def containers(job: Json) -> list[Json]:
    specs = job["spec"][kind_info(job["kind"]).replica_field].values()
    return [c for rspec in specs for c in rspec["template"]["spec"]["containers"]]


def test_every_folder_with_a_job_is_an_example() -> None:
    assert sorted(p.parent.name for p in FOLDERS.glob("*/job.yaml")) == NAMES
    assert {"pytorch", "tensorflow", "xgboost", "mpi", "paddle", "jax", "mxnet", DRA} <= set(NAMES)


def test_every_shipped_accelerator_profile_has_a_pytorch_example() -> None:
    assert {f"pytorch-{profile}" for profile in PROFILES} <= set(NAMES)


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
    scripts = {p.name: p.read_text() for p in scripts_folder(name).iterdir() if p.suffix == ".py"}
    assert scripts and config_map["data"] == scripts


@pytest.mark.parametrize("name", NAMES)
def test_every_replica_mounts_the_config_map_and_runs_only_scripts_it_holds(name: str) -> None:
    config_map, job = documents(name)
    servers = {k.removeprefix(f"{DEFAULT_SERVER}.") for k in job["metadata"].get("annotations", {})}
    for rtype, rspec in job["spec"][kind_info(job["kind"]).replica_field].items():
        pod = rspec["template"]["spec"]
        if rtype in servers:  # runs the operator's default server, no script of the example's
            assert [set(c) & {"command", "args"} for c in pod["containers"]] == [set()]
            continue
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


@pytest.mark.parametrize("name", LOCAL)
def test_trainop_run_reads_the_document_as_one_job_and_its_config_map(name: str) -> None:
    config_map, job = documents(name)
    assert len(all_documents(name)) == 2
    manifest = parse(example(name).document, f"example:{name}")
    assert manifest.job == job
    assert manifest.config_maps == {config_map["metadata"]["name"]: config_map}


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_a_provider_example_is_the_pytorch_example_with_its_profile_on_master_and_worker(
    profile: str,
) -> None:
    name = f"pytorch-{profile}"
    _, job = documents(name)
    _, plain = documents("pytorch")
    annotations = job["metadata"].pop("annotations")
    count = annotations["trainop.dev/accelerator.Master"].partition(":")[2]
    assert annotations == {
        "trainop.dev/accelerator.Master": profile + (f":{count}" if count else ""),
        "trainop.dev/accelerator.Worker": profile + (f":{count}" if count else ""),
    }
    # Where torchrun could not count the profile's devices, the example says one process per pod, as
    # admission suggests; the script is the same either way.
    counted = devices.device(PROFILES[profile].resource)
    assert counted is not None
    assert job["spec"].pop("nprocPerNode", None) == (None if counted.torchrun_counts else "1")
    renamed = yaml.safe_dump(plain).replace("pytorch-dist-digits", name)
    assert job == yaml.safe_load(renamed)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_webhook_writes_the_profile_into_the_provider_examples_templates(profile: str) -> None:
    _, job = documents(f"pytorch-{profile}")
    count = job["metadata"]["annotations"]["trainop.dev/accelerator.Worker"].partition(":")[2] or "1"
    documented = DOCUMENTED[profile]
    admission = admit(as_created(job, datetime.now(UTC)))
    assert admission.checks.ok, admission.checks.message
    for rtype, pod in pod_specs(admission.job).items():
        (container,) = pod["containers"]
        assert container["resources"] == {"limits": {documented["resource"]: count}}, rtype
        assert pod.get("nodeSelector", {}) == documented.get("nodeSelector", {}), rtype
        assert pod.get("tolerations", []) == documented.get("tolerations", []), rtype
        own = [e for e in container["env"] if e["name"] != "ACCURACY_TARGET"]
        assert own == documented.get("env", []), rtype


def test_the_dra_example_carries_the_claim_template_every_pod_claims_from() -> None:
    _, template, job = all_documents(DRA)
    assert (template["apiVersion"], template["kind"]) == ("resource.k8s.io/v1", "ResourceClaimTemplate")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    for rtype, pod in pod_specs(job).items():
        assert pod["resourceClaims"] == [
            {"name": request["name"], "resourceClaimTemplateName": template["metadata"]["name"]}
        ], rtype
        (container,) = pod["containers"]
        assert container["resources"] == {"claims": [{"name": request["name"]}]}, rtype


def test_the_webhook_passes_the_dra_examples_claims_through_unchanged() -> None:
    _, job = documents(DRA)
    admission = admit(as_created(job, datetime.now(UTC)))
    assert admission.checks.ok, admission.checks.message
    for rtype, pod in pod_specs(admission.job).items():
        assert pod["resourceClaims"] == pod_specs(job)[rtype]["resourceClaims"]
        assert pod["containers"][0]["resources"] == pod_specs(job)[rtype]["containers"][0]["resources"]


def test_trainop_run_refuses_the_dra_example_saying_it_allocates_no_claims() -> None:
    with pytest.raises(ManifestError) as err:
        parse(example(DRA).document, f"example:{DRA}")
    assert str(err.value) == (
        f"example:{DRA}: document 2: kind ResourceClaimTemplate (resource.k8s.io/v1) is not accepted: "
        + NO_DRA
    )


def test_an_example_ships_the_scripts_its_scripts_from_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(FOLDERS / "pytorch", tmp_path / "pytorch")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "job.yaml").write_text((FOLDERS / "pytorch" / "job.yaml").read_text())
    (tmp_path / "copy" / SCRIPTS_FROM).write_text("pytorch\n")
    monkeypatch.setattr(packaged, "_root", lambda: tmp_path)
    assert example("copy").document == example("pytorch").document


def fake_example(root: Path, name: str, script: bool = False, scripts_from: str | None = None) -> None:
    folder = root / name
    folder.mkdir()
    (folder / "job.yaml").write_text((FOLDERS / "pytorch" / "job.yaml").read_text())
    if script:
        (folder / "train.py").write_text("print('hello')\n")
    if scripts_from:
        (folder / SCRIPTS_FROM).write_text(f"{scripts_from}\n")


def test_scripts_from_beside_scripts_of_its_own_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_example(tmp_path, "a", script=True, scripts_from="b")
    fake_example(tmp_path, "b", script=True)
    monkeypatch.setattr(packaged, "_root", lambda: tmp_path)
    with pytest.raises(ValueError) as err:
        example("a")
    assert (
        str(err.value)
        == "example a: has scripts of its own (train.py) and scripts-from (b); keep one of them"
    )


@pytest.mark.parametrize("target", ["c", "a", "b"], ids=["unknown", "itself", "another-scripts-from"])
def test_scripts_from_must_name_another_example_with_scripts_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    fake_example(tmp_path, "a", scripts_from=target)
    fake_example(tmp_path, "b", scripts_from="a")
    monkeypatch.setattr(packaged, "_root", lambda: tmp_path)
    with pytest.raises(ValueError) as err:
        example("a")
    assert str(err.value) == (
        f"example a: scripts-from names {target!r}, which is not another example with scripts of its own; "
        "the examples are: a, b"
    )


def test_an_unknown_example_lists_the_known_ones() -> None:
    with pytest.raises(UnknownExampleError) as err:
        example("tensorflo")
    assert str(err.value) == (
        f"no example named 'tensorflo'; did you mean \"tensorflow\"?; the examples are: {', '.join(NAMES)}"
    )
