"""TrainJobs and TrainingRuntimes whose pods kwok runs to the outcome their annotations ask for
(tests/e2e/kwok-stages.yaml), for the e2e modules that run TrainJobs under Trainer's controller or ours."""

from __future__ import annotations

from typing import Any

from trainop_stack import IMAGE

from tests.trainjob.builders import container, runtime, train_job, trainer_step

Json = dict[str, Any]


def kwok_runtime(annotations: dict[str, str], name: str = "kwok") -> Json:
    """A torch TrainingRuntime (in whatever namespace it is applied to) whose one try per pod ends as
    ``annotations`` say."""
    step = trainer_step(container("node", IMAGE))
    step["template"]["spec"]["backoffLimit"] = 0
    step["template"]["spec"]["template"]["metadata"] = {"annotations": annotations}
    rt = runtime(step, policy={"numNodes": 1, "torch": {}}, kind="TrainingRuntime", name=name)
    rt["metadata"].pop("namespace")
    return rt


def kwok_job(name: str = "train", **spec: Any) -> Json:
    """A TrainJob of two nodes of the ``kwok`` TrainingRuntime, to be created in a test's namespace."""
    job = train_job(name, "kwok", trainer={"numNodes": 2}, **spec)
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    for key in ("namespace", "uid"):
        job["metadata"].pop(key)
    return job
