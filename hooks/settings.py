"""The hook server's settings: one frozen object, read from the environment once at start-up.

gunicorn's master builds it when it reads hooks.gunicorn_conf (a bad value ends the process there, with
the variable's name on stderr); the workers it forks import hooks.app and use the same object.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainop import extensions
from trainop.envvalues import ByteSize, Text, at_start_up
from trainop.job.settings import Settings
from trainop.kubeclient import KUBECONFIG_ENV
from trainop.metrics import MetricsPort
from trainop.serving import Listener

PREFIX = "TRAINOP_HOOK"
# A resync of a 1000-replica TFJob is ~82 MiB: TF_CONFIG names every replica in every pod, and
# Metacontroller's last-applied annotation repeats it (bench/README.md). One such sync costs a worker
# ~250 MiB; the chart's 1536Mi pod limit holds a few at once. Larger TFJobs need TRAINOP_HOOK_MAX_BODY_BYTES.
MAX_BODY = ByteSize("TRAINOP_HOOK_MAX_BODY_BYTES", 128 * 1024 * 1024)
# The largest answer the hook sends. Validation already bounds what a job implies (its children take at
# most 48 MiB, trainop.admission.validation.MAX_CHILDREN_BYTES, estimated from above), so this only
# catches what that estimate missed, or is an operator's lower ceiling.
MAX_RESPONSE = ByteSize("TRAINOP_HOOK_MAX_RESPONSE_BYTES", 64 * 1024 * 1024)
# Estimated parse memory (trainop.jsoncost) one worker's requests may hold at once, and so the most one
# request may cost. Every admissible job's resync must fit alone: with every pod and Service as the
# apiserver returns them (managedFields, conditions, containerStatuses), a PyTorchJob of 1 + 10,000
# Workers is a ~125 MiB body estimated at ~1.15 GiB (~0.85 GiB of it really taken at the peak of
# parsing), and bodies that dense at the 128 MiB body limit at ~1.2 GiB (bench/README.md#largest-jobs).
# Hostile bodies take at most ~90% of their estimate, so the chart gives a hook pod of 2 workers 3Gi.
MAX_INFLIGHT = ByteSize("TRAINOP_HOOK_MAX_INFLIGHT_BYTES", 1280 * 1024 * 1024)
KUBECONFIG = Text(KUBECONFIG_ENV, "")


@dataclass(frozen=True)
class HookLimits:
    """Bytes: of a request body, of the parse estimate one worker holds at once, of an answer."""

    max_body_bytes: int = MAX_BODY.default
    max_inflight_bytes: int = MAX_INFLIGHT.default
    max_response_bytes: int = MAX_RESPONSE.default


@dataclass(frozen=True)
class HookSettings:
    sync: Settings
    limits: HookLimits
    listener: Listener
    metrics: MetricsPort
    # A kubeconfig for TTL deletion and Events instead of the pod's ServiceAccount; "" for none.
    kubeconfig: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> HookSettings:
        extensions.check_settings(environ)
        return cls(
            sync=Settings.from_env(environ),
            limits=HookLimits(
                max_body_bytes=MAX_BODY.read(environ),
                max_inflight_bytes=MAX_INFLIGHT.read(environ),
                max_response_bytes=MAX_RESPONSE.read(environ),
            ),
            listener=Listener.from_env(PREFIX, environ, bind="0.0.0.0:8080", workers=2, threads=8),
            metrics=MetricsPort.from_env(PREFIX, environ, bind="0.0.0.0:8081"),
            kubeconfig=KUBECONFIG.read(environ),
        )


@functools.cache
def current() -> HookSettings:
    """This process's settings: built the first time (in gunicorn's master, from hooks.gunicorn_conf),
    then the same object, also in the workers it forks."""
    return at_start_up("trainop hooks", lambda: HookSettings.from_env(os.environ))
