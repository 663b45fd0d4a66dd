#!/usr/bin/env bash
# Install trainop (editable, with its dev tools and the Kubeflow SDK the e2e tests drive) and what the
# examples need. Idempotent: on a prepared machine it finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib/toolchains.sh
. hack/lib/toolchains.sh
PYTHON=${PYTHON:-python3}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# openssl makes the TLS certificates of the webhook and e2e tests.
if ! command -v openssl >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi

"$PYTHON" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
PYTHON="$PYTHON" bash hack/install-examples.sh
# pyenv exposes new console scripts (`trainop`) through shims made by a rehash.
if command -v pyenv >/dev/null; then pyenv rehash || true; fi

# What a first-time user needs to read after a silent install: what it put where, and what to type next.
echo "installed: trainop $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("trainop"))')" \
  "(editable, from $(pwd), with its test tools) and the frameworks the examples run with"
echo "next: trainop run example:pytorch    (trainop examples list: the others; trainop ui: the runs' pages)"
