#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install, build (or reuse) the control plane, lint, type-check,
# then every test including the end-to-end ones. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib/toolchains.sh
. hack/lib/toolchains.sh
PYTHON=${PYTHON:-python3}

bash hack/install.sh
bash hack/build-control-plane.sh
bash hack/build-kubeflow.sh  # Kubeflow itself, for tests/differential
# The real-node tier (tests/e2e_node): kubelet, kube-proxy, CoreDNS, containerd; the examples' images.
bash hack/build-node.sh
bash hack/build-training-images.sh

"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
"$PYTHON" -m mypy
# The package layering of pyproject.toml's [tool.importlinter] (import-linter has no `python -m` entry).
"$PYTHON" -c 'from importlinter.cli import lint_imports_command; lint_imports_command()'

# pytest exits 5 when it collects nothing; that is a failure here, like any other non-zero exit.
"$PYTHON" -m pytest -q "$@"

# Fuzzing at volume: 10,000 hostile bodies for each of /sync, /finalize, /mutate and /validate in-process,
# 2,000 per server through gunicorn (no 5xx, no worker death); hooks and webhooks in parallel, one per core.
# The run above used the fast default (200).
fuzz() { TRAINOP_FUZZ_EXAMPLES=${TRAINOP_FUZZ_EXAMPLES_CI:-10000} "$PYTHON" -m pytest -q -p no:cacheprovider "$@"; }
fuzz tests/hooks/test_fuzz_hostile.py "tests/test_fuzz_gunicorn.py::test_hostile_hook_calls_never_get_a_5xx_or_kill_a_worker" &
hooks_fuzz=$!
fuzz tests/webhooks/test_fuzz.py -k hostile \
  "tests/test_fuzz_gunicorn.py::test_hostile_admission_reviews_never_get_a_5xx_or_kill_a_worker" &
webhooks_fuzz=$!
wait "$hooks_fuzz"
wait "$webhooks_fuzz"
