"""A Kubernetes Event a sync implies, as a value; the recorder turns it into a core/v1 Event.

Kubeflow records most events on every reconcile and lets client-go fold identical ones into one object
with a growing count. A stateless hook cannot count reconciles, so each event carries an `occurrence`:
a value that is the same for every sync implying the same happening (a retry, a lagging cache) and
differs for a genuinely new one (another pod uid, another transition time). The recorder turns a new
occurrence of an existing event into a count bump, and a repeated one into nothing.

Some of an event's text comes from the request (a pod's waiting message, a validation message quoting
a field), so every event is bounded when it is made (docs/limits.md#events-and-metrics): a reason is a
short word, a message at most 1 KiB of printable text.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

NORMAL = "Normal"
WARNING = "Warning"
# events.k8s.io/v1 refuses a reason over 128 characters, and reasons are words a program can match:
# the kubelet's (ImagePullBackOff, OOMKilled) and Kubeflow's, one of which has spaces
# ("ServiceAccount is exist"). Empty is allowed: Kubeflow records a pod's empty reason as it is.
MAX_REASON = 128
REASON = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9 ._-]{0,127})?")
# The apiserver refuses an events.k8s.io note over 1 KiB, and client-go's recorders cut messages there.
MAX_MESSAGE_BYTES = 1024
TRUNCATED = "..."
# An occurrence lands in an annotation of the Event; longer ones (a forged pod uid) are hashed.
MAX_OCCURRENCE = 253


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str
    # Same for every sync implying the same happening; differs for a new one (see the module doc).
    occurrence: str
    # Events about single children are rate-limited per job and type like client-go's; the job's own
    # transitions (Succeeded, Failed, Suspended...) in a bucket of their own, so pod events never
    # crowd them out.
    about_child: bool = True
    # The job failed validation: recorded only if the apiserver's copy of the job fails it the same way.
    validation: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", bounded_message(self.message))
        if len(self.occurrence) > MAX_OCCURRENCE:
            digest = hashlib.sha256(self.occurrence.encode(errors="surrogatepass")).hexdigest()
            object.__setattr__(self, "occurrence", "sha256:" + digest)

    def name(self, job_name: str, job_uid: str) -> str:
        """A deterministic object name: client-go's aggregation key (type, reason, message) per job uid."""
        digest = hashlib.sha256(f"{job_uid}\n{self.type}\n{self.reason}\n{self.message}".encode())
        return f"{job_name}.{digest.hexdigest()[:16]}"

    @property
    def well_formed(self) -> bool:
        """Whether the reason is one a kubelet or a controller could have written (REASON)."""
        return REASON.fullmatch(self.reason) is not None


def well_formed(events: Iterable[Event]) -> list[Event]:
    """The events whose reason is a word; a reason made up of anything else cannot come from the
    kubelet or from us, so its event is not recorded at all."""
    return [e for e in events if e.well_formed]


def _printable(char: str) -> str:
    # Newlines and tabs stay (a container's termination message is often several lines); other control
    # characters, and the format characters that reorder text on a terminal (bidi overrides), do not.
    if char in "\n\t":
        return char
    return " " if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn") else char


def bounded_message(message: str) -> str:
    """`message` with unprintable characters blanked and cut to MAX_MESSAGE_BYTES of UTF-8."""
    # No character takes less than a byte: the first MAX_MESSAGE_BYTES characters hold all that can stay.
    head = message[:MAX_MESSAGE_BYTES]
    text = head if head.isprintable() else "".join(_printable(ch) for ch in head)
    data = text.encode()
    if len(message) <= MAX_MESSAGE_BYTES and len(data) <= MAX_MESSAGE_BYTES:
        return text
    return data[: MAX_MESSAGE_BYTES - len(TRUNCATED)].decode(errors="ignore") + TRUNCATED
