#!/usr/bin/env python3
"""Extract JobSet v0.12.0's spec schema from its CRD, for the Trainer v2 CRDs that embed it.

A TrainingRuntime's `spec.template.spec` is a JobSet spec, and a TrainJob's trainer and initializer carry
core/v1 types (env vars, resource requirements, volumes) as controller-gen renders them inside a CRD
(with its `default: ""` on reference names, which the built-in OpenAPI document lacks). JobSet's own CRD
holds both: its `spec`, and inside it the pod template every Kubernetes type of a TrainJob comes from.
Output: `trainop/install/schemas/jobset_spec.json`, checked in, so the generator needs no JobSet source.

    bash hack/build-jobset.sh                  # puts the CRD in $CACHE/jobset/crds/
    python hack/extract_jobset_schema.py       # or --crd path/to/jobset.x-k8s.io_jobsets.yaml
    trainop crds --write

Descriptions are cut to their first sentence, as for the pod template, so each CRD stays well below
etcd's object size limit; everything else is kept as JobSet's CRD has it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_pod_template_schema import first_sentence

VERSION = "v0.12.0"
API_VERSION = "v1alpha2"
CRD_FILE = "jobset.x-k8s.io_jobsets.yaml"
OUTPUT = Path(__file__).resolve().parent.parent / "trainop" / "install" / "schemas" / "jobset_spec.json"


def default_crd() -> Path:
    cache = Path(os.environ.get("TRAINOP_E2E_CACHE") or Path.home() / ".cache" / "trainop-e2e")
    return cache / "jobset" / "crds" / CRD_FILE


def shortened(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: first_sentence(v) if k == "description" and isinstance(v, str) else shortened(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [shortened(v) for v in node]
    return node


def extract(crd: Any) -> Any:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == API_VERSION)
    return shortened(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--crd", type=Path, default=None, help=f"JobSet's CRD (default: {default_crd()})")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    path: Path = args.crd or default_crd()
    raw = path.read_bytes()
    data = {
        "source": {
            "module": f"sigs.k8s.io/jobset@{VERSION}",
            "path": f"config/components/crd/bases/{CRD_FILE}",
            "schema": f"{API_VERSION} spec",
            "sha256": hashlib.sha256(raw).hexdigest(),
            "generator": "hack/extract_jobset_schema.py",
        },
        "schema": extract(yaml.safe_load(raw)),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes) from {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
