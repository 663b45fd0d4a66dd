"""What the fault and load tests (and bench/load_bench.py) read off a running stack, never through our code.

* ``enable_audit``: a kube-apiserver audit policy that logs every write to pods, services and the
  kubeflow.org jobs; ``AuditLog`` counts them per verb for one client (Metacontroller's user agent).
  Child writes beyond creates and deletes are what a sync hook that is not a fixed point costs.
* ``HookLog``: the hook server's one-JSON-line-per-request log, counted per job.
* ``MetacontrollerLog``: Metacontroller's failed syncs (``failed to sync <Kind> '<ns>/<name>'``, which its
  workqueue logs through klog for every sync that returned an error).
* ``process_stats``: CPU seconds and RSS of a process group (gunicorn's master and workers) from /proc.
* ``PodTracker``: a pod watch on one namespace that remembers every UID each pod name ever had, and
  reconnects (relist + watch) when the apiserver goes away, so a pod deleted and created again is seen.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controlplane import ControlPlane

METACONTROLLER_AGENT = "metacontroller/"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
HOOK_PATHS = ("/sync", "/finalize")
_FAILED_SYNC = re.compile(r"failed to sync (\w+) '([^'/]*)/([^']*)'")


def _lines(path: Path, offset: int = 0) -> Iterator[str]:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            for raw in fh:
                yield raw.decode(errors="replace")
    except FileNotFoundError:
        return


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# ---------------------------------------------------------------------------------------------- audit
def audit_policy() -> dict[str, Any]:
    """Metadata-level events for writes to pods, services and jobs; nothing else (keeps the log small)."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {
                "level": "Metadata",
                "verbs": list(WRITE_VERBS),
                "resources": [{"group": "", "resources": ["pods", "services"]}, {"group": "kubeflow.org"}],
            },
            {"level": "None"},
        ],
    }


def audit_log_path(cp: ControlPlane) -> Path:
    return cp.work_dir / "audit.log"


def enable_audit(cp: ControlPlane) -> Path:
    """Add audit flags to ``cp`` before it starts (a restarted apiserver keeps them); returns the log path."""
    policy = cp.work_dir / "audit-policy.json"  # JSON is YAML to the apiserver's decoder
    policy.write_text(json.dumps(audit_policy(), indent=1))
    log = audit_log_path(cp)
    cp.apiserver_args += [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",  # every event is on disk before the response: counts are exact
    ]
    return log


@dataclass(frozen=True)
class Write:
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def writes(self, namespace: str, agent: str = METACONTROLLER_AGENT, offset: int = 0) -> list[Write]:
        """Successful (2xx) writes in ``namespace`` by clients whose user agent starts with ``agent``."""
        out: list[Write] = []
        for line in _lines(self.path, offset):
            if namespace not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            code = int((event.get("responseStatus") or {}).get("code") or 0)
            if (
                event.get("stage") != "ResponseComplete"
                or ref.get("namespace") != namespace
                or not str(event.get("userAgent", "")).startswith(agent)
                or not 200 <= code < 300
            ):
                continue
            out.append(
                Write(
                    verb=event["verb"],
                    resource=ref.get("resource", ""),
                    subresource=ref.get("subresource", ""),
                    namespace=namespace,
                    name=ref.get("name", ""),
                    code=code,
                )
            )
        return out


def child_writes(writes: list[Write]) -> Counter[str]:
    """``{"pods create": n, "services update": m, ...}`` for writes to the children themselves."""
    return Counter(
        f"{w.resource} {w.verb}" for w in writes if w.resource in ("pods", "services") and not w.subresource
    )


def extra_child_writes(writes: list[Write]) -> list[Write]:
    """Child writes that are neither creates nor deletes (updates and patches a fixed point never needs)."""
    return [
        w
        for w in writes
        if w.resource in ("pods", "services") and not w.subresource and w.verb not in ("create", "delete")
    ]


# ---------------------------------------------------------------------------------------------- logs
class HookLog:
    """The hook server log: one JSON object per /sync or /finalize call with kind, namespace and name."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def calls(self, namespace: str, offset: int = 0) -> Counter[str]:
        """Hook calls per job name in ``namespace`` since ``offset``."""
        out: Counter[str] = Counter()
        for line in _lines(self.path, offset):
            if not line.startswith("{") or namespace not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            # Other JSON lines (e.g. about Events) name jobs too; a hook call is the line with its path.
            if (
                isinstance(entry, dict)
                and entry.get("path") in HOOK_PATHS
                and entry.get("namespace") == namespace
                and "name" in entry
            ):
                out[str(entry["name"])] += 1
        return out


class MetacontrollerLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def failed_syncs(self, namespace: str | None = None, offset: int = 0) -> list[str]:
        """Lines reporting a failed sync (of a job in ``namespace``, if given) since ``offset``."""
        out = []
        for line in _lines(self.path, offset):
            m = _FAILED_SYNC.search(line)
            if m and (namespace is None or m.group(2) == namespace):
                out.append(line.strip())
        return out


# ---------------------------------------------------------------------------------------------- /proc
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()  # comm may contain spaces; fields from "state" on


def group_pids(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (a ManagedProcess's session leader and its children)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry))[2]) == pgid:
                out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(out)


@dataclass
class ProcessStats:
    cpu_seconds: float
    rss_bytes: dict[int, int] = field(default_factory=dict)  # per pid

    @property
    def max_rss(self) -> int:
        return max(self.rss_bytes.values(), default=0)


def process_stats(pgid: int) -> ProcessStats:
    """User + system CPU of every live process of the group, and each one's resident set size."""
    cpu = 0.0
    rss: dict[int, int] = {}
    for pid in group_pids(pgid):
        try:
            fields = _stat_fields(pid)
            cpu += (int(fields[11]) + int(fields[12])) / _CLK_TCK
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss[pid] = int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return ProcessStats(cpu, rss)


# ---------------------------------------------------------------------------------------------- pods
class PodTracker:
    """Every UID each pod of a namespace had while the tracker ran; survives apiserver restarts.

    Between a lost watch and the relist a pod could be replaced unseen; the audit log's pod creates
    close that gap for callers that need it.
    """

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.cp = cp
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.uids: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pods-{namespace}", daemon=True)

    def __enter__(self) -> PodTracker:
        self._thread.start()
        if not self._listed.wait(30):
            raise RuntimeError(f"pod watch on {self.path} did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # the daemon thread ends with its current watch

    def replaced(self) -> dict[str, list[str]]:
        """Pod names seen with more than one UID (a pod deleted and created again)."""
        with self._lock:
            return {n: sorted(u) for n, u in self.uids.items() if len(u) > 1}

    def names(self) -> set[str]:
        with self._lock:
            return set(self.uids)

    def _see(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        with self._lock:
            self.uids.setdefault(meta["name"], set()).add(meta["uid"])

    def _get(self, query: dict[str, str], timeout: float) -> http.client.HTTPResponse:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.cp.api_port, context=self.cp.client_ssl_context(), timeout=timeout
        )
        conn.request("GET", f"{self.path}?{urllib.parse.urlencode(query)}")
        resp = conn.getresponse()
        if resp.status != 200:
            raise OSError(f"GET {self.path}: HTTP {resp.status}")
        return resp

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                listing = json.loads(self._get({}, 30).read())
                for pod in listing["items"]:
                    self._see(pod)
                self._listed.set()
                # Short server-side watches: the thread notices _stop at least every 20 s.
                query = {"watch": "1", "resourceVersion": listing["metadata"]["resourceVersion"],
                         "timeoutSeconds": "20"}  # fmt: skip
                resp = self._get(query, 60)
                while not self._stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._see(event["object"])
            except (OSError, ValueError, http.client.HTTPException):
                time.sleep(0.5)  # apiserver down or restarting: relist when it is back
