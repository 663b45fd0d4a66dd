"""`trainop ui --cluster --auth proxy` against an e2e stack, and browser pages that carry the headers an
authenticating proxy would add (the secret it shares with the UI, the user, the groups), so every request
is made as the user they name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page
from trainop_stack import TrainopStack

REPO = Path(__file__).resolve().parents[2]
ADMIN = "ui-admin"
# The one group the UI impersonates (--impersonate-groups); other groups a page names are left out.
GROUP = "ml-readers"
PROXY_SECRET = "e2e-proxy-secret"


@contextmanager
def served_ui(stack: TrainopStack) -> Iterator[str]:
    """The UI's base URL; the user ADMIN is a cluster-admin."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": ADMIN},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": ADMIN}],
    }  # fmt: skip
    stack.kubectl("apply", "-f", "-", input=json.dumps(binding))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "ui", "--cluster", "--auth", "proxy",
         "--groups-header", "X-Forwarded-Groups", f"--impersonate-groups={GROUP}", "--writable", "--port=0"],
        cwd=REPO,
        env={**os.environ, "TRAINOP_KUBECONFIG": str(stack.kubeconfig),
             "TRAINOP_UI_PROXY_SECRET": PROXY_SECRET},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # gunicorn logs its start before the line with the address
        seen.append(line)
        if " at http://" in line:
            break
    else:
        raise AssertionError("".join(seen))
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # never block gunicorn on a full pipe
    try:
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        stack.kubectl("delete", "clusterrolebinding", ADMIN, check=False)


def as_user(browser: Browser, user: str, groups: tuple[str, ...] = ()) -> Page:
    """A page whose every request carries the headers an authenticating proxy would add."""
    headers = {
        "X-Trainop-Proxy-Secret": PROXY_SECRET,
        "X-Forwarded-User": user,
        **({"X-Forwarded-Groups": ",".join(groups)} if groups else {}),
    }
    context = browser.new_context(viewport={"width": 1280, "height": 900}, extra_http_headers=headers)
    return context.new_page()
