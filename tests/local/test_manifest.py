"""`trainop run` takes one kubeflow.org job per file and the ConfigMaps it mounts, from a path, an https
URL or a packaged example, and says plainly when what it was given is not that."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import container, job, replica
from trainop.jsontypes import Json
from trainop.local.manifest import NO_DRA, ManifestError, as_created, load, parse


def config_map(name: str = "scripts", **fields: Any) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"train.py": "x"},
        **fields,
    }


def mounting(*names: str, optional: bool = False) -> Json:
    """A PyTorchJob whose Master mounts the ConfigMaps `names`."""
    pod = replica("PyTorchJob", containers=[container("pytorch", command=["python3", "/s/train.py"])])
    pod["template"]["spec"]["volumes"] = [
        {"name": f"v{i}", "configMap": {"name": n, **({"optional": True} if optional else {})}}
        for i, n in enumerate(names)
    ]
    return job("PyTorchJob", "mnist", Master=pod)


def stream(*docs: Json | None) -> str:
    return yaml.safe_dump_all(list(docs))


def rejected(text: str) -> str:
    with pytest.raises(ManifestError) as err:
        parse(text, "job.yaml")
    assert str(err.value).startswith("job.yaml: ")
    return str(err.value)


def test_one_job_is_read_as_written() -> None:
    assert parse(stream(job("PyTorchJob", "mnist", Master=1))).job["metadata"]["name"] == "mnist"


def test_empty_documents_around_the_job_are_ignored() -> None:
    assert parse(f"---\n{stream(job('PyTorchJob', Master=1))}\n---\n").job["kind"] == "PyTorchJob"


def test_config_maps_before_the_job_are_read_with_it() -> None:
    manifest = parse(stream(config_map("scripts"), config_map("data"), mounting("scripts", "data")))
    assert manifest.job["kind"] == "PyTorchJob"
    assert manifest.config_maps == {"scripts": config_map("scripts"), "data": config_map("data")}


def test_config_maps_may_also_follow_the_job() -> None:
    assert set(parse(stream(mounting("scripts"), config_map("scripts"))).config_maps) == {"scripts"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no document; expected one job (kinds: TFJob, PyTorchJob"),
        ("- a\n- b\n", "document 1 has no kind"),
        ("kind: [", "not valid YAML"),
        (stream(config_map()), "holds no job; expected one kubeflow.org/v1 job and the ConfigMaps"),
        (
            stream(job("PyTorchJob", "mnist", Master=1), job("PyTorchJob", "other", Master=1)),
            "holds 2 jobs (PyTorchJob/mnist, PyTorchJob/other)",
        ),
    ],
)
def test_files_that_are_not_one_job_are_rejected_with_the_reason(text: str, message: str) -> None:
    assert message in rejected(text)


def test_a_kind_other_than_a_job_or_config_map_is_refused_naming_its_document() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    message = rejected(stream(config_map(), service, mounting("scripts")))
    assert "document 2: kind Service is not accepted" in message
    assert "one kubeflow.org/v1 job and the ConfigMaps its volumes mount" in message


def test_a_secret_is_refused_and_told_where_credentials_go() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    message = rejected(stream(secret, job("PyTorchJob", Master=1)))
    assert "document 1: kind Secret is not accepted" in message
    assert "environment" in message


def test_a_pod_with_resource_claims_is_refused_as_nothing_here_allocates_them() -> None:
    claiming = job("PyTorchJob", Master=1, Worker=2)
    worker = claiming["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    worker["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    assert rejected(stream(claiming)) == (
        f"job.yaml: spec.pytorchReplicaSpecs.Worker.template.spec.resourceClaims: {NO_DRA}"
    )


def test_a_dra_object_is_refused_naming_its_document_and_why() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "g"},
    }
    assert rejected(stream(template, job("PyTorchJob", Master=1))) == (
        f"job.yaml: document 1: kind ResourceClaimTemplate (resource.k8s.io/v1) is not accepted: {NO_DRA}"
    )


def test_a_mounted_config_map_missing_from_the_file_names_the_volume() -> None:
    message = rejected(stream(config_map("other"), mounting("scripts")))
    assert (
        "spec.pytorchReplicaSpecs.Master.template.spec.volumes[0].configMap.name: Not found: 'scripts'"
        in message
    )
    assert "ConfigMaps in the file: other" in message


def test_an_optional_config_map_may_be_missing() -> None:
    assert parse(stream(mounting("scripts", optional=True))).config_maps == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"apiVersion": "v2"}, "document 1 (ConfigMap): apiVersion: Unsupported value: 'v2'"),
        (
            {"metadata": {"name": "Scripts"}},
            "metadata.name: Invalid value: 'Scripts': a lowercase DNS subdomain",
        ),
        ({"metadata": {}}, "metadata.name: Invalid value: None"),
        (
            {"metadata": {"name": "scripts", "namespace": "other"}},
            "metadata.namespace: Invalid value: 'other': the job is in namespace 'default'",
        ),
        ({"data": {"../train.py": "x"}}, "data['../train.py']: Invalid value: a key is a file name"),
        ({"data": {"..": "x"}}, "data['..']: Invalid value"),
        ({"data": {"epochs": 3}}, "data['epochs']: Invalid value: must be a string; quote it"),
        ({"data": ["train.py"]}, "data: Invalid value: must be a map"),
        ({"binaryData": {"w.bin": "AAAA"}}, "binaryData: locally only data (text)"),
        ({"data": {"big": "x" * (1024 * 1024)}}, "data: Too long: 1048579 bytes, at most 1048576"),
    ],
)
def test_an_invalid_config_map_is_refused_with_the_field(fields: Json, message: str) -> None:
    assert message in rejected(stream({**config_map(), **fields}, mounting("scripts")))


def test_two_config_maps_of_one_name_are_refused() -> None:
    message = rejected(stream(config_map(), config_map(), mounting("scripts")))
    assert 'document 2 (ConfigMap "scripts"): metadata.name: Duplicate value' in message


def test_a_missing_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load(tmp_path / "absent.yaml")


def test_a_file_that_is_not_text_is_a_manifest_error(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(ManifestError, match="not UTF-8 text"):
        load(tmp_path / "job.yaml")


def test_relative_paths_resolve_against_the_folder_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(stream(job("PyTorchJob", Master=1)))
    assert load(tmp_path / "job.yaml").base_dir == tmp_path.resolve()


def test_a_packaged_example_is_loaded_by_name_with_its_config_map() -> None:
    manifest = load("example:pytorch")
    assert manifest.job["metadata"]["name"] == "pytorch-dist-digits"
    assert set(manifest.config_maps["pytorch-dist-digits-script"]["data"]) == {"train.py"}
    assert manifest.base_dir == Path.cwd()


def test_an_unknown_example_names_the_known_ones() -> None:
    with pytest.raises(ManifestError) as err:
        load("example:pytorh")
    assert str(err.value).startswith(
        "example:pytorh: no example named 'pytorh'; did you mean \"pytorch\"?; the examples are: jax, mpi"
    )


def test_a_url_of_another_scheme_is_refused_not_read_as_a_path() -> None:
    with pytest.raises(ManifestError, match=r"^ftp://host/job\.yaml: unsupported URL scheme 'ftp'"):
        load("ftp://host/job.yaml")


def test_a_ca_file_for_something_other_than_a_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="--ca-file applies to an https URL only"):
        load("example:pytorch", ca_file=tmp_path / "ca.pem")


def test_created_jobs_get_what_the_apiserver_fills_in() -> None:
    written = job("PyTorchJob", "mnist", Master=1)
    del written["metadata"]["namespace"], written["metadata"]["uid"]
    created = as_created(parse(stream(written)).job, datetime(2024, 5, 1, tzinfo=UTC))
    meta = created["metadata"]
    assert (meta["name"], meta["namespace"], meta["creationTimestamp"]) == (
        "mnist",
        "default",
        "2024-05-01T00:00:00Z",
    )
    assert meta["uid"]


def test_generate_name_gets_a_random_suffix() -> None:
    written = job("PyTorchJob", Master=1)
    written["metadata"] = {"generateName": "run-"}
    created = as_created(parse(stream(written)).job, datetime.now(UTC))
    assert created["metadata"]["name"].startswith("run-") and len(created["metadata"]["name"]) == 9


def test_a_misspelt_kind_is_refused_with_the_kind_it_likely_means(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: kubeflow.org/v1\nkind: PytorchJob\nmetadata: {name: x}\nspec: {}\n")
    with pytest.raises(ManifestError) as err:
        load(str(path))
    assert 'kind PytorchJob is not accepted; did you mean "PyTorchJob"?: trainop run takes' in str(err.value)
