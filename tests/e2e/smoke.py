"""Smoke test for the e2e control plane: ``python tests/e2e/smoke.py [--metacontroller] [--keep]``.

Brings up etcd + kube-apiserver + KCM + scheduler + kwok, creates a namespace and two pods that kwok
drives to Succeeded and to Failed (exit code 137), prints timings, tears down and checks that no
process survived. ``--metacontroller`` also runs the real Metacontroller against a toy CRD
and an in-process sync hook, and checks child creation, parent status and garbage collection.
Exits non-zero on any failure; the work dir (component logs) is kept on failure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Run as a script, so this directory is on sys.path and the sibling module imports directly.
from controlplane import ControlPlane, ControlPlaneError, default_bin_dir, free_ports, missing_binaries

NAMESPACE = "smoke"


def pod(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "containers": [{"name": "main", "image": "example.invalid/noop:1"}],
            "restartPolicy": "Never",
        },
    }


def wait_jsonpath(cp: ControlPlane, ref: str, path: str, want: str, timeout: float = 60.0) -> float:
    """Seconds until ``kubectl get ref -o jsonpath=path`` prints ``want``."""
    t0 = time.monotonic()
    cp.wait_until(
        f"{ref} {path} == {want}",
        lambda: cp.kubectl("get", ref, "-n", NAMESPACE, "-o", f"jsonpath={path}", check=False).stdout == want,
        timeout=timeout,
        interval=0.2,
    )
    return time.monotonic() - t0


def check_pods(cp: ControlPlane) -> dict[str, float]:
    t = time.monotonic()
    cp.create_namespace(NAMESPACE)
    timings = {"namespace_ready": time.monotonic() - t}
    ok = pod("succeeds", {"e2e.kwok.io/outcome": "Succeeded", "e2e.kwok.io/run-for": "1s"})
    bad = pod(
        "fails",
        {"e2e.kwok.io/outcome": "Failed", "e2e.kwok.io/run-for": "1s", "e2e.kwok.io/exit-code": "137"},
    )
    t = time.monotonic()
    cp.kubectl(
        "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [ok, bad]})
    )
    wait_jsonpath(cp, "pod/succeeds", "{.status.phase}", "Succeeded")
    timings["pod_succeeded"] = time.monotonic() - t
    wait_jsonpath(cp, "pod/fails", "{.status.phase}", "Failed")
    timings["pod_failed"] = time.monotonic() - t
    code = cp.kubectl(
        "get",
        "pod/fails",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}",
    ).stdout
    if code != "137":
        raise ControlPlaneError(f"expected exit code 137 on pod/fails, got {code!r}")
    node = cp.kubectl("get", "pod/succeeds", "-n", NAMESPACE, "-o", "jsonpath={.spec.nodeName}").stdout
    print(f"pods: succeeds -> Succeeded on {node}, fails -> Failed exitCode={code}")
    return timings


# --------------------------------------------------------------------------------------------- metacontroller
TOY_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "smokejobs.e2e.example.com"},
    "spec": {
        "group": "e2e.example.com",
        "scope": "Namespaced",
        "names": {
            "kind": "SmokeJob",
            "plural": "smokejobs",
            "singular": "smokejob",
            "listKind": "SmokeJobList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


class _Hook(BaseHTTPRequestHandler):
    """Sync hook: one Pod per SmokeJob; status mirrors the pod's phase."""

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parent = req["parent"]
        name = f"{parent['metadata']['name']}-pod"
        observed = req["children"].get("Pod.v1", {}).get(name)
        phase = (observed or {}).get("status", {}).get("phase", "Missing")
        child = pod(name, {"e2e.kwok.io/outcome": parent["spec"].get("outcome", "Succeeded")})
        del child["metadata"]["namespace"]  # exercises namespace defaulting
        body = json.dumps({"status": {"podPhase": phase}, "children": [child]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def check_metacontroller(cp: ControlPlane) -> dict[str, float]:
    (port,) = free_ports(1)
    server = ThreadingHTTPServer(("127.0.0.1", port), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        t = time.monotonic()
        cc = {
            "apiVersion": "metacontroller.k8s.io/v1alpha1",
            "kind": "CompositeController",
            "metadata": {"name": "smokejob-controller"},
            "spec": {
                "generateSelector": True,
                "parentResource": {"apiVersion": "e2e.example.com/v1", "resource": "smokejobs"},
                "childResources": [{"apiVersion": "v1", "resource": "pods"}],
                "hooks": {"sync": {"webhook": {"url": f"http://127.0.0.1:{port}/sync"}}},
            },
        }
        cp.apply(json.dumps(cc))
        job = {
            "apiVersion": "e2e.example.com/v1",
            "kind": "SmokeJob",
            "metadata": {"name": "sj", "namespace": NAMESPACE},
            "spec": {"outcome": "Succeeded"},
        }
        cp.apply(json.dumps(job))
        wait_jsonpath(cp, "smokejob/sj", "{.status.podPhase}", "Succeeded", timeout=90)
        timings = {"cr_to_child_succeeded": time.monotonic() - t}
        owner = cp.kubectl(
            "get", "pod/sj-pod", "-n", NAMESPACE, "-o", "jsonpath={.metadata.ownerReferences[0].kind}"
        ).stdout
        if owner != "SmokeJob":
            raise ControlPlaneError(f"pod/sj-pod not owned by the SmokeJob: {owner!r}")
        t = time.monotonic()
        cp.kubectl("delete", "smokejob/sj", "-n", NAMESPACE, "--wait=true")
        cp.wait_until(
            "pod/sj-pod garbage-collected",
            lambda: cp.kubectl("get", "pod/sj-pod", "-n", NAMESPACE, check=False).returncode != 0,
            timeout=60,
        )
        timings["cr_delete_to_child_gone"] = time.monotonic() - t
        print("metacontroller: child created, status synced, child garbage-collected")
        return timings
    finally:
        server.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--bin-dir", type=Path, default=default_bin_dir())
    ap.add_argument("--metacontroller", action="store_true", help="also check Metacontroller")
    ap.add_argument("--keep", action="store_true", help="keep the work dir with the component logs")
    args = ap.parse_args()
    missing = missing_binaries(args.bin_dir)
    if missing:
        print(
            f"missing binaries in {args.bin_dir}: {missing}; run hack/build-control-plane.sh", file=sys.stderr
        )
        return 2
    work = Path(tempfile.mkdtemp(prefix="trainop-e2e-smoke-"))
    cp = ControlPlane(args.bin_dir, work)
    ok = False
    timings: dict[str, float] = {}
    try:
        # The toy CRD goes in before KCM starts so its garbage collector watches it from the start.
        crds = [json.dumps(TOY_CRD)] if args.metacontroller else []
        cp.start(crds=crds, metacontroller=args.metacontroller)
        timings.update(cp.timings)
        timings.update(check_pods(cp))
        if args.metacontroller:
            timings.update(check_metacontroller(cp))
        ok = True
    except BaseException:
        traceback.print_exc()
    finally:
        t = time.monotonic()
        cp.stop()
        timings["teardown"] = time.monotonic() - t
    leftovers = cp.leftover_processes()
    print("timings (seconds; startup ones are cumulative from start):")
    for k, v in timings.items():
        print(f"  {k:28s} {v:7.2f}")
    print(f"processes started: {len(cp.started)}, still alive after teardown: {leftovers or 'none'}")
    if ok and not leftovers and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work dir kept: {work}")
    print("SMOKE OK" if ok and not leftovers else "SMOKE FAILED")
    return 0 if ok and not leftovers else 1


if __name__ == "__main__":
    sys.exit(main())
