"""The webhook certificate's keeper as a process of its own: `python -m webhooks.certrotate`.

It runs `webhooks.selfcert.CertKeeper.sync` (Secret, serving file, caBundle injection) at start and
every TRAINOP_WEBHOOK_CERT_CHECK_SECONDS, with the ServiceAccount token, in a container of its own: the
serving container, which parses every untrusted AdmissionReview, then has no token at all and only
reads the key + certificate file this process writes into the volume they share (files mode,
`webhooks.tls.CertReloader` follows each renewal). In the chart and manifests it is a native sidecar
(an init container with restartPolicy Always) whose startup probe (`--check`) holds the serving
container back until the first file is in place. Settings: webhooks.selfcert.CertSettings, read from the
environment once at start.

`--check` exits 0 if the serving file exists and is not empty, else 1 (the startup probe).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from trainop import kubeclient
from trainop.envvalues import SettingError
from webhooks import selfcert


def ready(settings: selfcert.CertSettings) -> bool:
    try:
        return settings.pem_file.stat().st_size > 0
    except OSError:
        return False


def main(argv: Sequence[str] = sys.argv[1:]) -> int:
    if list(argv) not in ([], ["--check"]):
        print("usage: python -m webhooks.certrotate [--check]", file=sys.stderr)
        return 2
    try:
        settings = selfcert.CertSettings.from_env(os.environ)
    except SettingError as exc:
        print(f"webhooks.certrotate: {exc}", file=sys.stderr)
        return 2
    if argv:
        return 0 if ready(settings) else 1
    selfcert.configure_logging()
    client = dataclasses.replace(
        kubeclient.connect(settings.kubeconfig), field_manager=selfcert.FIELD_MANAGER
    )
    rotator = selfcert.Rotator(selfcert.CertKeeper(client, settings))

    def stop(signum: int, frame: FrameType | None) -> None:
        rotator.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        rotator.start_up()
    except RuntimeError:  # stopped before the first certificate was ready
        return 0
    rotator.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
