"""A Kubernetes Event a sync implies, as a value; the recorder turns it into a core/v1 Event.

Kubeflow records most events on every reconcile and lets client-go fold identical ones into one object
with a growing count. A stateless hook cannot count reconciles, so each event carries an `occurrence`:
a value that is the same for every sync implying the same happening (a retry, a lagging cache) and
differs for a genuinely new one (another pod uid, another transition time). The recorder turns a new
occurrence of an existing event into a count bump, and a repeated one into nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str
    # Same for every sync implying the same happening; differs for a new one (see the module doc).
    occurrence: str
    # Events about single children are rate-limited per job like client-go's; the job's own
    # transitions (Succeeded, Failed, Suspended...) are always recorded.
    about_child: bool = True

    def name(self, job_name: str, job_uid: str) -> str:
        """A deterministic object name: client-go's aggregation key (type, reason, message) per job uid."""
        digest = hashlib.sha256(f"{job_uid}\n{self.type}\n{self.reason}\n{self.message}".encode())
        return f"{job_name}.{digest.hexdigest()[:16]}"
