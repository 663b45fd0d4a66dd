"""The MPI launcher's exec rights on a real apiserver, checked by impersonating its ServiceAccount.

An MPIJob computes its workers' names from its own name, so an MPIJob `bar` beside a PyTorchJob `bar`
in one namespace names `bar-worker-0`, the PyTorchJob's pod (its own create of that pod fails). Its
launcher's Role must not allow exec into that pod; it allows exec into the worker the MPIJob does own.
"""

from __future__ import annotations

from trainop_stack import Namespace, job, kwok_annotations, replica

RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)


def test_an_mpijob_named_like_another_jobs_workers_cannot_exec_into_their_pods(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job("PyTorchJob", "bar", {
            "Master": replica("PyTorchJob", 1, annotations=RUN_FOREVER),
            "Worker": replica("PyTorchJob", 1, annotations=RUN_FOREVER),
        })
    )  # fmt: skip
    ns.wait_phase("bar-worker-0", "Running", timeout=90)
    ns.apply(
        job("MPIJob", "bar", {
            "Launcher": replica("MPIJob", 1, annotations=RUN_FOREVER),
            "Worker": replica("MPIJob", 2, annotations=RUN_FOREVER),
        })
    )  # fmt: skip
    ns.wait_phase("bar-worker-1", "Running", timeout=90)
    launcher = f"--as=system:serviceaccount:{ns.name}:bar-launcher"

    def can_exec(pod: str) -> bool:
        args = ("auth", "can-i", "create", f"pods/{pod}", "--subresource=exec", launcher)
        res = ns.kubectl(*args, check=False)
        return res.stdout.strip() == "yes"

    # Once the Role names the worker the MPIJob owns, it has been computed from the pods it observed.
    ns.wait_until("exec into the MPIJob's own worker", lambda: can_exec("bar-worker-1"), timeout=60)
    assert not can_exec("bar-worker-0")
    owner = ns.get("pod/bar-worker-0")["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("PyTorchJob", "bar")
    role = ns.get("role/bar-launcher")
    exec_rules = [r for r in role["rules"] if "pods/exec" in r["resources"]]
    assert [r["resourceNames"] for r in exec_rules] == [["bar-worker-1"]]
