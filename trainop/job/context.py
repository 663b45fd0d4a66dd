"""A defaulted job with the facts every part of a sync needs, computed once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from trainop.api.jsonvalues import clean
from trainop.api.kinds import KindInfo
from trainop.job.settings import Settings
from trainop.jsontypes import Json


@dataclass(frozen=True)
class JobContext:
    info: KindInfo
    job: Json  # defaulted and valid
    settings: Settings

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.job["metadata"].get("namespace") or "default")

    @property
    def spec(self) -> Json:
        return dict(self.job["spec"])

    @property
    def run_policy(self) -> Json:
        return dict(self.job["spec"].get("runPolicy") or {})

    @cached_property
    def replica_specs(self) -> dict[str, Json]:
        """Replica specs by canonical type, in the kind's canonical order."""
        raw = self.job["spec"][self.info.replica_field]
        by_type = {self.info.canonical_type(k): v for k, v in raw.items()}
        return {t: by_type[t] for t in self.info.replica_types if t in by_type}

    @cached_property
    def memo(self) -> dict[str, Any]:
        """Values a framework derives once per sync and reuses for every pod (e.g. TF_CONFIG's cluster)."""
        return {}

    @cached_property
    def templates(self) -> dict[str, Json]:
        """Pod templates by replica type, cleaned once so every pod built from them is clean."""
        return {rtype: clean(spec["template"]) for rtype, spec in self.replica_specs.items()}

    @cached_property
    def template_bytes(self) -> dict[str, bytes]:
        """Each template as JSON: every pod of its type copies it with one decode, not a round trip."""
        return {rtype: orjson.dumps(template) for rtype, template in self.templates.items()}

    def replicas(self, rtype: str) -> int:
        spec = self.replica_specs.get(rtype)
        if not spec:
            return 0
        # An explicit `replicas: null` survives defaulting's setdefault (the apiserver prunes it; `trainop
        # run` and hand-written requests do not): it means the default, as an absent field does.
        value = spec.get("replicas")
        return self.info.replicas_default(rtype) if value is None else int(value)

    def total_replicas(self) -> int:
        # Asked once per pod (WORLD_SIZE, TF's single-process check): summed once per sync.
        total = self.memo.get("total_replicas")
        if total is None:
            total = self.memo["total_replicas"] = sum(self.replicas(t) for t in self.replica_specs)
        return int(total)

    def restart_policy(self, rtype: str) -> str:
        return str(self.replica_specs[rtype]["restartPolicy"])

    def has(self, rtype: str) -> bool:
        return rtype in self.replica_specs

    def containers(self, rtype: str) -> list[Json]:
        return list(self.replica_specs[rtype]["template"]["spec"]["containers"])

    def default_container(self, rtype: str) -> Json | None:
        return next((c for c in self.containers(rtype) if c.get("name") == self.info.default_container), None)

    @cached_property
    def declared_ports(self) -> dict[str, int]:
        """Per type, the port named after the kind on the default container, else the kind's default port."""
        out = {}
        for rtype in self.replica_specs:
            container = self.default_container(rtype) or {}
            named = [
                p["containerPort"]
                for p in container.get("ports") or []
                if p.get("name") == self.info.port_name and isinstance(p.get("containerPort"), int)
            ]
            out[rtype] = int(named[0]) if named else self.info.port
        return out

    def declared_port(self, rtype: str) -> int:
        return self.declared_ports.get(rtype, self.info.port)

    def port(self, rtype: str, index: int = 0) -> int:
        return self.settings.addresses.port(rtype, index, self.declared_port(rtype))

    def host(self, rtype: str, index: int = 0) -> str:
        return self.settings.addresses.host(self.info, self.name, rtype, index)

    def fqdn(self, rtype: str, index: int = 0) -> str:
        return self.settings.addresses.fqdn(self.info, self.name, self.namespace, rtype, index)

    @property
    def suspended(self) -> bool:
        return bool(self.run_policy.get("suspend"))
