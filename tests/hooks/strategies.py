"""hypothesis strategies: valid jobs of every kind and what the kubelet may do to their pods."""

from __future__ import annotations

from hypothesis import assume
from hypothesis import strategies as st

from tests.builders import job, replica, with_run_policy, with_spec
from tests.controller.fakes import Cluster
from trainop.admission.defaults import apply_defaults
from trainop.admission.validation import validate
from trainop.job.settings import Settings
from trainop.jsontypes import Json

POLICIES = st.sampled_from([None, "Always", "OnFailure", "Never", "ExitCode"])
CLEAN = st.sampled_from([None, "None", "Running", "All"])
EXIT_CODES = st.sampled_from([0, 1, 2, 127, 128, 130, 137, 143])
SETTINGS = st.sampled_from(
    [Settings(), Settings(), Settings(gang_scheduler="volcano"), Settings(gang_scheduler="scheduler-plugins")]
)


@st.composite
def _types(draw: st.DrawFn, kind: str) -> dict[str, int]:
    n = st.integers(0, 4)
    maybe = st.booleans()
    types: dict[str, int] = {}
    if kind == "TFJob":
        lead = draw(st.sampled_from([None, "Chief", "Master"]))
        if lead:
            types[lead] = 1
        for t in ("PS", "Worker", "Evaluator"):
            if draw(maybe):
                types[t] = draw(st.integers(0, 1) if t == "Evaluator" else n)
    elif kind == "PyTorchJob":
        if draw(maybe):
            types["Master"] = 1
        types["Worker"] = draw(st.integers(1, 4))
    elif kind == "XGBoostJob":
        types["Master"] = 1
        if draw(maybe):
            types["Worker"] = draw(n)
    elif kind == "MPIJob":
        types["Launcher"] = 1
        types["Worker"] = draw(n)
    elif kind == "PaddleJob":
        if draw(maybe):
            types["Master"] = draw(st.integers(0, 2))
        types["Worker"] = draw(n)
    elif kind == "JAXJob":
        types["Worker"] = draw(n)
    elif kind == "MXJob":
        if draw(maybe):
            types["Scheduler"] = 1
        for t in ("Server", "Worker"):
            if draw(maybe):
                types[t] = draw(n)
        if not types:
            types["Worker"] = 1
    return types


@st.composite
def jobs(draw: st.DrawFn, suspend: bool | None = False, kinds: tuple[str, ...] | None = None) -> Json:
    """A job that passes validation, with random replica counts, restart and clean-pod policies."""
    kind = draw(
        st.sampled_from(
            kinds or ("TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "PaddleJob", "JAXJob", "MXJob")
        )
    )
    specs = {}
    for rtype, count in draw(_types(kind)).items():
        policy = draw(POLICIES)
        specs[rtype] = replica(kind, count, **({"restartPolicy": policy} if policy else {}))
    out = job(kind, name="j", namespace="ns", **specs)
    if kind == "TFJob":
        out = with_spec(
            out,
            successPolicy=draw(st.sampled_from(["", "AllWorkers"])),
            enableDynamicWorker=draw(st.booleans()),
        )
    elif kind == "PyTorchJob" and draw(st.booleans()):
        workers = specs["Worker"]["replicas"]
        out = with_spec(
            out, elasticPolicy={"minReplicas": 1, "maxReplicas": max(workers, 1), "maxRestarts": 3}
        )
    elif kind == "MPIJob":
        out = with_spec(out, slotsPerWorker=draw(st.integers(1, 4)))
    run_policy: Json = {}
    clean = draw(CLEAN)
    if clean:
        run_policy["cleanPodPolicy"] = clean
    if draw(st.booleans()):
        run_policy["backoffLimit"] = draw(st.integers(0, 6))
    if suspend is None:
        run_policy["suspend"] = draw(st.booleans())
    elif suspend:
        run_policy["suspend"] = True
    if run_policy:
        out = with_run_policy(out, **run_policy)
    assume(validate(apply_defaults(out)).ok)
    return out


def kubelet(data: st.DataObject, cluster: Cluster) -> None:
    """Let the kubelet (and Volcano) move every pod of the cluster to some state."""
    for name in cluster.pod_names():
        state = data.draw(
            st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]), label=name
        )
        if state == "Running":
            cluster.run(name)
            restarts = data.draw(st.integers(0, 2), label=f"{name} restarts")
            if restarts:
                cluster.restart_in_place(name, restarts)
        elif state == "Succeeded":
            cluster.succeed(name)
        elif state == "Failed":
            cluster.fail(name, exit_code=data.draw(EXIT_CODES, label=f"{name} exit code"))
    if data.draw(st.booleans(), label="pod group moves"):
        cluster.set_podgroup_phase(data.draw(st.sampled_from(["Pending", "Inqueue", "Running"])))
