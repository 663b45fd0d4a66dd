"""trainop's TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs accept and refuse what Kubeflow
Trainer v2.3.0's do.

Two CRDs of one apiserver version validate an object alike when their schemas are the same, so the
proof is the schemas themselves: ours (generated from trainop.trainjob.models and JobSet's CRD) against
the CRDs hack/build-trainer.sh takes from Trainer's tag, node by node, descriptions aside (they are ours,
and the apiserver never reads them). Every other difference must be listed here with its reason. The
real apiserver then checks that ours are valid CRDs (structural, CEL rules that compile within their cost
budget), by a server-side dry run that changes nothing on the shared control plane.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import built_by
from trainer_controller import BUILD_SCRIPT, trainer_dir
from trainop_stack import TrainopStack

from trainop.install.crds import without_descriptions
from trainop.install.trainer_crds import trainer_crds

pytestmark = pytest.mark.e2e

# (CRD, path of the node) -> why ours differs there.
LISTED = {
    ("trainjobs", "spec.versions[0].schema.openAPIV3Schema.properties.status.minProperties"): (
        "Metacontroller writes the hook's status whole and adds observedGeneration, which this schema "
        "prunes: a job with nothing to report yet (no JobSet status, no condition) would have its every "
        "status write refused, where Trainer's controller writes no status at all"
    ),
}


def differences(theirs: Any, ours: Any, path: str = "") -> list[str]:
    """The paths where two JSON values differ (a list is compared item by item when both have as many)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        found = []
        for key in sorted(set(theirs) | set(ours)):
            child = f"{path}.{key}" if path else key
            if key not in theirs or key not in ours:
                found.append(child)
            else:
                found += differences(theirs[key], ours[key], child)
        return found
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        return [
            d
            for i, (a, b) in enumerate(zip(theirs, ours, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if theirs == ours else [path]


def trainers_crds() -> dict[str, Any]:
    built_by(BUILD_SCRIPT, trainer_dir().parent / "bin" / "trainer-manager", trainer_dir() / "build.log")
    out = {}
    for path in sorted((trainer_dir() / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        out[crd["spec"]["names"]["plural"]] = crd
    return out


@pytest.mark.parametrize("plural", ["trainjobs", "trainingruntimes", "clustertrainingruntimes"])
def test_our_crd_is_trainers_but_for_descriptions_and_the_listed_differences(plural: str) -> None:
    ours = {crd["spec"]["names"]["plural"]: crd for crd in trainer_crds()}[plural]
    theirs = trainers_crds()[plural]
    assert ours["metadata"]["name"] == theirs["metadata"]["name"]
    found = differences(without_descriptions(theirs["spec"]), without_descriptions(ours["spec"]), "spec")
    unlisted = [path for path in found if (plural, path) not in LISTED]
    assert unlisted == [], "\n".join(unlisted)
    stale = [path for (crd, path) in LISTED if crd == plural and path not in found]
    assert stale == [], f"listed but no longer different: {stale}"


def test_the_apiserver_takes_our_crds_as_valid(stack: TrainopStack, tmp_path: Path) -> None:
    path = tmp_path / "trainer-crds.yaml"
    path.write_text(yaml.safe_dump_all(trainer_crds()))
    out = stack.cp.kubectl(
        "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", str(path), "-o", "json"
    )
    applied = json.loads(out.stdout)
    names = sorted(item["metadata"]["name"] for item in applied.get("items", [applied]))
    assert names == [
        "clustertrainingruntimes.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
    ]
