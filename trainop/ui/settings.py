"""The UI server's settings: its options (trainop.ui.cli), and with --cluster the serving limits and
kubeconfig read from the environment once at start-up (`UiSettings.with_env`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from trainop.envvalues import PositiveInt, Text
from trainop.kubeclient import KUBECONFIG_ENV
from trainop.serving import Deadlines
from trainop.ui.auth import AuthSettings
from trainop.ui.links import Link

TENSORBOARD_URL = "/tensorboard/${metadata.namespace}/${metadata.name}/"
MAX_CONNECTIONS = PositiveInt("TRAINOP_UI_MAX_CONNECTIONS", 256)
MAX_USER_STREAMS = PositiveInt("TRAINOP_UI_MAX_USER_STREAMS", 16)
KUBECONFIG = Text(KUBECONFIG_ENV, "")


@dataclass(frozen=True)
class UiSettings:
    """The UI server's one settings object."""

    writable: bool = False  # read-only unless the UI's operator allows writes
    auth: AuthSettings = field(default_factory=AuthSettings)
    links: tuple[Link, ...] = ()
    max_streams: int = 64
    # Of those, what one signed-in user may hold (TRAINOP_UI_MAX_USER_STREAMS), so one user's tabs (or
    # script) cannot take every stream from the others; without sign-in every stream is the one user's.
    max_user_streams: int = MAX_USER_STREAMS.default
    stream_seconds: float = 600.0
    poll_seconds: float = 1.0
    title: str = "trainop"
    # Where a job's TensorBoard is, over the job's fields like a link's URL; "" shows no TensorBoard link
    # (the field the TensorBoard extension's JobLink names).
    # The default is the path prefix the TensorBoard serves under, on the UI's own host: for an Ingress
    # in front of both that routes /tensorboard/ to the jobs' TensorBoard Services.
    tensorboard_url: str = TENSORBOARD_URL
    # gunicorn's (trainop/ui/gunicorn_conf.py): TRAINOP_UI_{HANDSHAKE,HEADER,BODY,RESPONSE}_TIMEOUT and
    # TRAINOP_UI_MAX_CONNECTIONS, open connections (at the cap the oldest one still sending its request,
    # else the oldest idle one, is closed for each new one).
    deadlines: Deadlines = field(default_factory=Deadlines)
    max_connections: int = MAX_CONNECTIONS.default
    # The cluster's kubeconfig (TRAINOP_KUBECONFIG) instead of the pod's ServiceAccount; "" for that.
    kubeconfig: str = ""

    def with_env(self, environ: Mapping[str, str]) -> UiSettings:
        """These settings with the values the environment sets (SettingError names a malformed one)."""
        return replace(
            self,
            deadlines=Deadlines.from_env("TRAINOP_UI", environ),
            max_connections=MAX_CONNECTIONS.read(environ),
            max_user_streams=MAX_USER_STREAMS.read(environ),
            kubeconfig=KUBECONFIG.read(environ),
        )
