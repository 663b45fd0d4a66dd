"""The real-node tier: the e2e control plane plus a real kubelet, containerd and pod network.

Its harness builds on tests/e2e (controlplane.py, trainop_stack.py), which is not a package: its
modules import each other by bare name, so that directory goes on sys.path here, before any module of
this package imports them.
"""

import sys
from pathlib import Path

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)
