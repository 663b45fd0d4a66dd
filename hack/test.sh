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

"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
"$PYTHON" -m mypy

# pytest exits 5 when it collects nothing; that is a failure here, like any other non-zero exit.
"$PYTHON" -m pytest -q "$@"
