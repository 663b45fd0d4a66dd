"""trainop.dev/accelerator.<ReplicaType>: each profile's resolved template, and each error, through admit()
and through the webhook app's /mutate and /validate."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from flask.testing import FlaskClient

from tests.builders import container, job, replica
from tests.controller.fakes import Cluster
from tests.local.runs import replica as run_replica
from tests.local.runs import trainop, write_job
from tests.webhooks.helpers import denial, mutated, validated
from trainop.admission.admit import admit
from trainop.extensions import accelerators
from trainop.extensions.accelerators import PROFILES_ENV, builtin_profiles
from trainop.frameworks.mpi import MPI, MPIJOB
from trainop.job.context import JobContext
from trainop.job.settings import Settings
from trainop.jsontypes import Json

REPO = Path(__file__).resolve().parents[2]
PROFILES = yaml.safe_load(accelerators.builtin_profiles_text())
WORKER = "spec.pytorchReplicaSpecs[Worker].template.spec"
ANNOTATION = "metadata.annotations[trainop.dev/accelerator.Worker]"


def annotated(annotations: dict[str, str], worker: Json | None = None, kind: str = "PyTorchJob") -> Json:
    out = job(kind, Master=1, Worker=worker or 2)
    out["metadata"]["annotations"] = annotations
    return out


def worker_spec(job_: Json) -> Json:
    spec: Json = job_["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    return spec


def expected_worker(profile: Json, count: int) -> Json:
    """The Worker pod spec docs/accelerators.md promises for a profile."""
    ctr: Json = {
        "name": "pytorch",
        "image": "busybox:1.36",
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
        "resources": {"limits": {profile["resource"]: str(count)}},
    }
    if profile.get("env"):
        ctr["env"] = profile["env"]
    out: Json = {"containers": [ctr]}
    if profile.get("nodeSelector"):
        out["nodeSelector"] = profile["nodeSelector"]
    if profile.get("tolerations"):
        out["tolerations"] = profile["tolerations"]
    return out


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_writes_its_resource_selector_tolerations_and_env_into_the_template(name: str) -> None:
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": f"{name}:4"}))

    assert admitted.checks.ok, admitted.checks.message
    assert worker_spec(admitted.job) == expected_worker(PROFILES[name], 4)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_is_patched_by_mutate_and_admitted_by_validate(client: FlaskClient, name: str) -> None:
    stored = mutated(client, annotated({"trainop.dev/accelerator.Worker": f"{name}:2"}))

    assert worker_spec(stored) == expected_worker(PROFILES[name], 2)
    assert validated(client, stored)["allowed"] is True


def test_the_count_defaults_to_one() -> None:
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4"}))

    assert worker_spec(admitted.job)["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_replica_types_without_an_annotation_are_left_alone() -> None:
    plain = admit(job("PyTorchJob", Master=1, Worker=2)).job
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4"})).job

    assert admitted["spec"]["pytorchReplicaSpecs"]["Master"] == plain["spec"]["pytorchReplicaSpecs"]["Master"]


def test_the_replica_type_in_the_key_may_be_spelt_in_any_case() -> None:
    admitted = admit(annotated({"trainop.dev/accelerator.worker": "amd-gpu:1"}))

    assert worker_spec(admitted.job)["containers"][0]["resources"] == {"limits": {"amd.com/gpu": "1"}}


def test_the_kinds_container_gets_the_devices_when_there_are_several() -> None:
    worker = replica("PyTorchJob", 1, [container("sidecar"), container("pytorch")])
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-eks:8"}, worker))

    sidecar, main = worker_spec(admitted.job)["containers"]
    assert "resources" not in sidecar
    assert main["resources"] == {"limits": {"nvidia.com/gpu": "8"}}


def test_values_the_user_set_that_agree_with_the_profile_are_kept_and_admitted() -> None:
    worker = replica("PyTorchJob", 1, [container("pytorch", resources={"limits": {"nvidia.com/gpu": 2}})])
    worker["template"]["spec"]["nodeSelector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-l4",
        "zone": "a",
    }
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4:2"}, worker))

    assert admitted.checks.ok
    spec = worker_spec(admitted.job)
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4", "zone": "a"}


def test_admitting_a_stored_job_again_changes_nothing() -> None:
    stored = admit(annotated({"trainop.dev/accelerator.Worker": "tpu-v5e-2x4:4"})).job
    again = admit(copy.deepcopy(stored))

    assert again.job == stored
    assert again.checks.ok


# ---------------------------------------------------------------------------------------------- errors
def test_a_limit_that_disagrees_with_the_count_is_refused_naming_the_field(client: FlaskClient) -> None:
    worker = replica("PyTorchJob", 1, [container("pytorch", resources={"limits": {"nvidia.com/gpu": 4}})])
    raw = annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4:2"}, worker)

    assert denial(client, mutated(client, raw)) == (
        f"{WORKER}.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: 4: conflicts with the "
        f'accelerator profile "nvidia-gke-l4" chosen by {ANNOTATION}, which sets "2"; remove the field (the '
        "profile fills it in) or choose another profile"
    )


def test_a_node_selector_that_disagrees_with_the_profile_is_refused_naming_the_label() -> None:
    worker = replica("PyTorchJob", 1)
    worker["template"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}

    message = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4"}, worker)).checks.message

    assert message.startswith(
        f'{WORKER}.nodeSelector[cloud.google.com/gke-accelerator]: Invalid value: "nvidia-h100-80gb": '
        'conflicts with the accelerator profile "nvidia-gke-l4"'
    )


def test_an_env_value_that_disagrees_with_the_profile_is_refused() -> None:
    worker = replica("PyTorchJob", 1, [container("pytorch", env=[{"name": "PJRT_DEVICE", "value": "CPU"}])])

    message = admit(annotated({"trainop.dev/accelerator.Worker": "tpu-v5e-2x4"}, worker)).checks.message

    assert message.startswith(f"{WORKER}.containers[0].env[0]: Invalid value: ")


def test_a_second_kind_of_accelerator_in_the_container_is_refused() -> None:
    worker = replica("PyTorchJob", 1, [container("pytorch", resources={"limits": {"amd.com/gpu": 1}})])

    message = admit(
        annotated({"trainop.dev/accelerator.Worker": "nvidia-gpu-operator"}, worker)
    ).checks.message

    assert message.startswith(f"{WORKER}.containers[0].resources.limits[amd.com/gpu]: Forbidden: 1: ")


def test_an_unknown_profile_is_refused_with_the_known_ones(client: FlaskClient) -> None:
    message = denial(client, annotated({"trainop.dev/accelerator.Worker": "nvidia-a100"}))

    known = ", ".join(f'"{n}"' for n in sorted(PROFILES))
    assert message == (
        f'{ANNOTATION}: Unsupported value: "nvidia-a100": unknown accelerator profile; '
        f"known profiles: {known}"
    )


@pytest.mark.parametrize("value", ["nvidia-gke-l4:two", "nvidia-gke-l4:", "NVIDIA", ":2", "a b"])
def test_a_value_not_of_the_form_profile_count_is_refused(value: str) -> None:
    message = admit(annotated({"trainop.dev/accelerator.Worker": value})).checks.message

    assert message == (
        f'{ANNOTATION}: Invalid value: "{value}": must be "<profile>" or "<profile>:<count>", e.g. '
        '"nvidia-gke-l4:2"'
    )


@pytest.mark.parametrize("count", ["0", "1025"])
def test_a_count_out_of_range_is_refused(count: str) -> None:
    message = admit(annotated({"trainop.dev/accelerator.Worker": f"nvidia-gke-l4:{count}"})).checks.message

    assert (
        message == f"{ANNOTATION}: Invalid value: {int(count)} devices: the count must be between 1 and 1024"
    )


@pytest.mark.parametrize("key", ["trainop.dev/accelerator", "trainop.dev/accelerator.Chief"])
def test_a_key_that_names_no_replica_type_of_the_job_is_refused_with_the_ones_it_has(key: str) -> None:
    message = admit(annotated({key: "nvidia-gke-l4"})).checks.message

    assert message == (
        f"metadata.annotations[{key}]: Invalid value: the key must name one of this PyTorchJob's replica "
        'types, one annotation per type: "trainop.dev/accelerator.Master", "trainop.dev/accelerator.Worker"'
    )


def test_a_conflicting_job_is_left_as_written_for_validation_to_report() -> None:
    worker = replica("PyTorchJob", 1, [container("pytorch", resources={"limits": {"nvidia.com/gpu": 4}})])
    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4:2"}, worker)).job

    assert worker_spec(admitted)["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 4}}


# ---------------------------------------------------------------------------------------------- configuration
def test_profiles_come_from_the_configured_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("lab-a100:\n  resource: nvidia.com/gpu\n  nodeSelector: {lab/gpu: a100}\n")
    monkeypatch.setenv(PROFILES_ENV, str(path))

    admitted = admit(annotated({"trainop.dev/accelerator.Worker": "lab-a100:1"}))

    assert worker_spec(admitted.job)["nodeSelector"] == {"lab/gpu": "a100"}
    assert (
        "nvidia-gke-l4"
        in admit(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-l4"})).checks.message
    )


def test_an_unreadable_profiles_file_refuses_jobs_that_ask_for_a_profile_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("broken:\n  resource: gpu\n")
    monkeypatch.setenv(PROFILES_ENV, str(path))

    message = admit(annotated({"trainop.dev/accelerator.Worker": "broken"})).checks.message

    assert message.startswith(f"{ANNOTATION}: Internal error: the accelerator profiles cannot be read (")
    assert "broken.resource: must be an extended resource name" in message
    assert admit(job("PyTorchJob", Master=1, Worker=1)).checks.ok


def test_the_chart_ships_the_built_in_profiles_as_its_defaults() -> None:
    values = yaml.safe_load((REPO / "charts/trainop/values.yaml").read_text())

    assert values["accelerators"]["profiles"] == PROFILES


def test_the_kustomize_component_ships_the_built_in_profiles() -> None:
    component = REPO / "manifests/components/accelerators/profiles.yaml"

    assert yaml.safe_load(component.read_text()) == PROFILES


def test_docs_list_every_built_in_profile() -> None:
    text = (REPO / "docs/accelerators.md").read_text()

    assert all(f"| `{name}` | `{p.resource}` |" in text for name, p in builtin_profiles().items())


# ---------------------------------------------------------------------------------------------- other entries
def test_a_job_that_skipped_the_webhook_gets_pods_with_the_profile_from_the_sync() -> None:
    cluster = Cluster(annotated({"trainop.dev/accelerator.Worker": "nvidia-gke-h100:8"}))
    cluster.sync()

    pod = cluster.pod("job-worker-1")["spec"]
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert pod["tolerations"] == PROFILES["nvidia-gke-h100"]["tolerations"]


def test_trainop_run_refuses_an_unknown_profile_as_the_webhook_would(tmp_path: Path) -> None:
    path = write_job(tmp_path, "PyTorchJob", Master=run_replica("PyTorchJob", ["true"]))
    raw = yaml.safe_load(path.read_text())
    raw["metadata"]["annotations"] = {"trainop.dev/accelerator.Master": "nvidia-a100"}
    path.write_text(yaml.safe_dump(raw))

    result = trainop(str(path), "--workdir", str(tmp_path / "run"))

    assert result.returncode == 2
    assert (
        "denied the request: metadata.annotations[trainop.dev/accelerator.Master]: Unsupported value: "
        '"nvidia-a100": unknown accelerator profile'
    ) in result.stderr


def test_an_mpijob_launcher_given_a_profile_becomes_a_gpu_launcher_with_its_first_container() -> None:
    launcher = replica("MPIJob", 1, [container("launcher"), container("sidecar")])
    raw = job("MPIJob", Launcher=launcher, Worker=1)
    raw["metadata"]["annotations"] = {"trainop.dev/accelerator.Launcher": "gaudi:1"}

    stored = admit(raw).job
    ctx = JobContext(MPIJOB, stored, Settings())

    first, second = stored["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    assert first["resources"] == {"limits": {"habana.ai/gaudi": "1"}}
    assert "resources" not in second
    assert MPI().gpu_launcher(ctx)
