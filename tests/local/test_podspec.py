"""Before anything runs, `trainop run` refuses the pods a real apiserver would refuse, for every field it
turns into a name or a path, with the apiserver's field path and wording."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, job, replica
from trainop import examples
from trainop.admission.defaults import apply_defaults
from trainop.frameworks import kind_info
from trainop.jsontypes import Json
from trainop.local.podspec import DNS1123_LABEL_MESSAGE, ENV_NAME_MESSAGE, pod_spec_errors, template_errors

SPEC = "spec.pytorchReplicaSpecs[Worker].template.spec"


def errors(spec: Json) -> list[str]:
    return [str(e) for e in pod_spec_errors(spec, SPEC)]


def spec(*containers: Json, **fields: Any) -> Json:
    return {"containers": list(containers) or [container("pytorch")], **fields}


def config_map(*items: Json, name: str = "cfg") -> Json:
    return {"name": name, "configMap": {"name": "j-config", "items": list(items)}}


@pytest.mark.parametrize("name", examples.names())
def test_every_example_passes(name: str) -> None:
    defaulted = apply_defaults(examples.example(name).job)
    assert template_errors(kind_info(defaulted["kind"]), defaulted) == []


def test_errors_name_the_replica_template_they_come_from() -> None:
    bad = replica("PyTorchJob", containers=[container("pytorch"), container("Side_car")])
    found = template_errors(kind_info("PyTorchJob"), job("PyTorchJob", Master=1, Worker=bad))
    assert [e.path for e in found] == [f"{SPEC}.containers[1].name"]


def test_a_container_name_that_is_a_path_is_refused() -> None:
    assert errors(spec(container("pytorch"), container("../../outside/log"))) == [
        f'{SPEC}.containers[1].name: Invalid value: "../../outside/log": {DNS1123_LABEL_MESSAGE}'
    ]


def test_a_container_name_with_dots_is_refused_as_the_apiserver_says_it() -> None:
    assert errors(spec(container("side.car"))) == [
        f'{SPEC}.containers[0].name: Invalid value: "side.car": must not contain dots'
    ]


def test_a_container_name_over_63_characters_is_refused() -> None:
    name = "a" * 64
    assert errors(spec(container(name))) == [
        f'{SPEC}.containers[0].name: Invalid value: "{name}": must be no more than 63 characters'
    ]


def test_an_init_container_may_not_share_a_container_name() -> None:
    assert errors(spec(initContainers=[container("pytorch")])) == [
        f'{SPEC}.initContainers[0].name: Duplicate value: "pytorch"'
    ]


def test_an_empty_container_list_is_refused() -> None:
    assert errors({"containers": []}) == [f"{SPEC}.containers: Required value"]


def test_a_volume_name_that_is_a_path_is_refused() -> None:
    assert errors(spec(volumes=[{"name": "../../outside", "emptyDir": {}}])) == [
        f'{SPEC}.volumes[0].name: Invalid value: "../../outside": {DNS1123_LABEL_MESSAGE}'
    ]


def test_two_volumes_may_not_share_a_name() -> None:
    volumes = [{"name": "scratch", "emptyDir": {}}, {"name": "scratch", "emptyDir": {}}]
    assert errors(spec(volumes=volumes)) == [f'{SPEC}.volumes[1].name: Duplicate value: "scratch"']


def test_a_volume_needs_exactly_one_source() -> None:
    volumes = [{"name": "none"}, {"name": "two", "emptyDir": {}, "hostPath": {"path": "/data"}}]
    assert errors(spec(volumes=volumes)) == [
        f"{SPEC}.volumes[0]: Required value: must specify a volume type",
        f"{SPEC}.volumes[1].hostPath: Forbidden: may not specify more than 1 volume type",
    ]


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/abs", "must be a relative path"),
        ("../x", "must not contain '..'"),
        ("a/../../x", "must not contain '..'"),
        ("..data", "must not start with '..'"),
    ],
)
def test_a_config_map_item_path_stays_inside_its_volume(path: str, detail: str) -> None:
    assert errors(spec(volumes=[config_map({"key": "hostfile", "path": path})])) == [
        f'{SPEC}.volumes[0].configMap.items[0].path: Invalid value: "{path}": {detail}'
    ]


def test_a_config_map_item_needs_a_key_and_a_path() -> None:
    assert errors(spec(volumes=[config_map({})])) == [
        f"{SPEC}.volumes[0].configMap.items[0].key: Required value",
        f"{SPEC}.volumes[0].configMap.items[0].path: Required value",
    ]


def test_file_modes_are_at_most_0777() -> None:
    volume = config_map({"key": "k", "path": "k", "mode": 0o1777})
    volume["configMap"]["defaultMode"] = -1
    assert errors(spec(volumes=[volume])) == [
        f"{SPEC}.volumes[0].configMap.defaultMode: Invalid value: -1: must be a number between 0 and 0777 "
        "(octal), both inclusive",
        f"{SPEC}.volumes[0].configMap.items[0].mode: Invalid value: 1023: must be a number between 0 and "
        "0777 (octal), both inclusive",
    ]


def test_a_host_path_may_not_step_back() -> None:
    assert errors(spec(volumes=[{"name": "data", "hostPath": {"path": "/data/../etc"}}])) == [
        f"{SPEC}.volumes[0].hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'"
    ]


def test_a_sub_path_stays_inside_its_volume() -> None:
    mounts = [
        {"name": "scratch", "mountPath": "/a", "subPath": "../../up"},
        {"name": "scratch", "mountPath": "/b", "subPathExpr": "/$(POD_NAME)"},
    ]
    volumes = [{"name": "scratch", "emptyDir": {}}]
    assert errors(spec(container("pytorch", volumeMounts=mounts), volumes=volumes)) == [
        f"{SPEC}.containers[0].volumeMounts[0].subPath: Invalid value: \"../../up\": must not contain '..'",
        f'{SPEC}.containers[0].volumeMounts[1].subPathExpr: Invalid value: "/$(POD_NAME)": '
        "must be a relative path",
    ]


def test_a_mount_names_a_valid_volume_and_a_unique_mount_path() -> None:
    mounts = [{"name": "scratch", "mountPath": "/data"}, {"name": "nope", "mountPath": "/data"}]
    volumes = [{"name": "scratch", "emptyDir": {}}]
    assert errors(spec(container("pytorch", volumeMounts=mounts), volumes=volumes)) == [
        f'{SPEC}.containers[0].volumeMounts[1].name: Not found: "nope"',
        f'{SPEC}.containers[0].volumeMounts[1].mountPath: Invalid value: "/data": must be unique',
    ]


@pytest.mark.parametrize("name", ["PATH=/tmp/evil", "TAB\tNAME", "NÄME", ""])
def test_an_environment_variable_name_is_printable_ascii_without_equals(name: str) -> None:
    found = errors(spec(container("pytorch", env=[{"name": name, "value": "x"}])))
    expected = "Required value" if not name else ENV_NAME_MESSAGE
    assert len(found) == 1 and found[0].startswith(f"{SPEC}.containers[0].env[0].name: ")
    assert found[0].endswith(expected)


def test_relaxed_environment_variable_names_are_allowed() -> None:
    env = [{"name": n, "value": "x"} for n in ("my.env-name", "1ST", "WITH SPACE", "a:b")]
    assert errors(spec(container("pytorch", env=env))) == []
