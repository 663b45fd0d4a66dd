"""The default TensorFlow server on the real apiserver (docs/parameter-server.md): what the webhooks store
and deny, the ConfigMap child the job owns, and the cause the Failed condition names when the PS exits
with the program's no-TensorFlow code. kwok runs no container: the pods' exit codes are kwok's; the
real-node tier runs the program itself."""

from __future__ import annotations

from typing import Any

import pytest
from trainop_stack import Namespace, job, kwok_annotations, replica

from trainop.extensions.parameterserver import MOUNT_PATH, PROGRAM, VOLUME, key_for
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW

pytestmark = pytest.mark.e2e

PS = key_for("PS")


def tfjob(name: str, ps_annotations: dict[str, str] | None = None, **ps_container: Any) -> dict[str, Any]:
    ps = replica(
        "TFJob", restart_policy="Never", annotations=ps_annotations or kwok_annotations(outcome=None)
    )
    ps["template"]["spec"]["containers"][0].update(ps_container)
    out = job(
        "TFJob",
        name,
        {
            "Chief": replica("TFJob", restart_policy="Never", annotations=kwok_annotations(outcome=None)),
            "PS": ps,
        },
    )
    out["metadata"]["annotations"] = {PS: "tensorflow"}
    return out


def test_a_ps_with_its_own_command_is_denied_naming_the_field(namespace: Namespace) -> None:
    done = namespace.create(tfjob("own", command=["python3", "ps.py"]), check=False)
    assert done.returncode != 0
    assert "spec.tfReplicaSpecs[PS].template.spec.containers[0].command: Forbidden" in done.stderr


def test_the_stored_template_and_the_configmap_child_are_as_documented(namespace: Namespace) -> None:
    namespace.create(tfjob("shown"))
    ps = namespace.get("tfjob/shown")["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]
    [ctr] = ps["containers"]
    assert ctr["command"] == [
        "python3",
        f"{MOUNT_PATH}/{PROGRAM}",
        "--termination-log",
        "/dev/termination-log",
    ]
    assert ctr["volumeMounts"] == [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}]
    assert ps["volumes"] == [{"name": VOLUME, "configMap": {"name": "shown-tf-server"}}]
    namespace.wait_until("the ConfigMap child", lambda: namespace.exists("configmap/shown-tf-server"))
    config_map = namespace.get("configmap/shown-tf-server")
    assert config_map["metadata"]["ownerReferences"][0]["kind"] == "TFJob"
    assert config_map["metadata"]["labels"]["trainop.dev/component"] == "default-server"
    assert "def main(" in config_map["data"][PROGRAM]
    pod = namespace.wait_phase("shown-ps-0", "Running")
    assert pod["spec"]["containers"][0]["command"] == ctr["command"]


def test_a_ps_exiting_with_the_no_tensorflow_code_fails_the_job_naming_the_cause(
    namespace: Namespace,
) -> None:
    failing = kwok_annotations(outcome="Failed", run_for="1s", exit_code=NO_TENSORFLOW)
    namespace.create(tfjob("no-tf", ps_annotations=failing))
    namespace.wait_for("tfjob/no-tf", "Failed", timeout=90)
    failed = namespace.condition("tfjob/no-tf", "Failed")
    assert failed is not None
    assert failed["message"].startswith(
        f"TFJob {namespace.name}/no-tf has failed because 1 PS replica(s) failed. no-tf-ps-0 ran the default "
        f"TensorFlow server ({PS}) in image "
    )
    assert f"which has no TensorFlow (exit code {NO_TENSORFLOW})" in failed["message"]
