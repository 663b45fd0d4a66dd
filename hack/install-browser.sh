#!/usr/bin/env bash
# What the browser tier (tests/ui_browser, `make browser`) needs: Debian's chromium, and playwright from
# PyPI (pinned in pyproject.toml's dev extra), which drives that chromium through its own bundled driver.
# Nothing is downloaded outside the package registries: playwright's own browser builds are never fetched.
# Idempotent: seconds when both are there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v chromium >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if ! "$PYTHON" -c 'import playwright' 2>/dev/null; then
  version=$(sed -n 's/.*"playwright==\([^"]*\)".*/\1/p' pyproject.toml)
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright==$version"
fi
