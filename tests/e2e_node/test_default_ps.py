"""The default TensorFlow server on a real node (docs/parameter-server.md): the tensorflow-ps example,
applied as a user does, trains with ParameterServerStrategy against a PS and a Worker whose containers
set no command, in trainop-examples/tensorflow:latest (tensorflow-cpu); and a PS in an image without
TensorFlow (trainop-examples/mxnet:latest, the standard library only) fails the job, the cause named in
its Failed condition and in the pod's termination message."""

from __future__ import annotations

import re

import pytest
from trainop_stack import Namespace

from tests.builders import container, job, replica
from tests.e2e_node.test_training import example_document, job_logs
from trainop.extensions.parameterserver import MOUNT_PATH, PROGRAM, key_for
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.jsontypes import Json

# The first pull of the tensorflow image and TensorFlow's import on a loaded 2-core machine.
JOB_TIMEOUT = 600.0
SUCCESS = r"chief: test accuracy (?P<value>[0-9.]+) >= target 0\.95: trained on the parameter server"


@pytest.mark.usefixtures("training_images")
def test_the_example_trains_with_default_servers_to_its_target(
    ns: Namespace, capsys: pytest.CaptureFixture[str]
) -> None:
    document, obj = example_document("tensorflow-ps")
    name = obj["metadata"]["name"]
    ns.apply(document)
    stored = ns.get(f"tfjobs/{name}")["spec"]["tfReplicaSpecs"]
    for rtype in ("PS", "Worker"):
        [ctr] = stored[rtype]["template"]["spec"]["containers"]
        assert ctr["command"][:2] == ["python3", f"{MOUNT_PATH}/{PROGRAM}"], ctr
    assert PROGRAM in ns.get(f"configmap/{name}-tf-server")["data"]
    try:
        ns.wait_for(f"tfjobs/{name}", "Succeeded", timeout=JOB_TIMEOUT)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{job_logs(ns, name)}") from None
    logs = ns.kubectl("logs", f"{name}-chief-0").stdout
    match = re.search(SUCCESS, logs)
    assert match, f"no success line in kubectl logs {name}-chief-0:\n{logs}"
    assert "chief: variables on /job:ps/replica:0/task:0/device:CPU:0" in logs
    assert float(match["value"]) >= 0.95
    with capsys.disabled():
        print(f"\n[tensorflow-ps] kubectl logs {name}-chief-0: {match.group(0)}")


def without_tensorflow() -> Json:
    """A Chief that only waits and a PS with no command, both in an image without TensorFlow."""
    image = "trainop-examples/mxnet:latest"
    chief = container("tensorflow", image, command=["python3", "-c", "import time; time.sleep(600)"])
    obj = job(
        "TFJob",
        name="no-tf",
        Chief=replica("TFJob", 1, [chief], restartPolicy="Never"),
        PS=replica("TFJob", 1, [container("tensorflow", image)], restartPolicy="Never"),
    )
    del obj["metadata"]["namespace"], obj["metadata"]["uid"]
    obj["metadata"]["annotations"] = {key_for("PS"): "tensorflow"}
    return obj


@pytest.mark.usefixtures("training_images")
def test_an_image_without_tensorflow_fails_the_job_naming_the_cause(ns: Namespace) -> None:
    ns.apply(without_tensorflow())
    try:
        ns.wait_for("tfjobs/no-tf", "Failed", timeout=300)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{job_logs(ns, 'no-tf')}") from None
    failed = ns.condition("tfjobs/no-tf", "Failed")
    assert failed is not None
    assert failed["message"] == (
        f"TFJob {ns.name}/no-tf has failed because 1 PS replica(s) failed. no-tf-ps-0 ran the default "
        f'TensorFlow server ({key_for("PS")}) in image "trainop-examples/mxnet:latest", which has no '
        f"TensorFlow (exit code {NO_TENSORFLOW}): use an image with TensorFlow, or give the PS container a "
        "command of its own."
    )
    [status] = ns.get("pod/no-tf-ps-0")["status"]["containerStatuses"]
    terminated = status["state"]["terminated"]
    assert terminated["exitCode"] == NO_TENSORFLOW
    assert terminated["message"].startswith("this image has no TensorFlow (No module named 'tensorflow')")
