#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install; `make check` (lint, format, types, generated
# files, import layering: seconds, so a mistake there fails before any build); build (or reuse) the
# control plane, Kubeflow and the node; then every test tier and the volume fuzz (`make tiers`, with the
# examples' images building beside the unit tier), each listing its 25 slowest tests. Extra arguments go to every pytest run, e.g. `-x`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/lib/toolchains.sh
. hack/lib/toolchains.sh
PYTHON=${PYTHON:-python3}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v make >/dev/null; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make >/dev/null
fi
# Each pytest run gets the extra arguments, quoted for the shell that runs make's recipes.
pytest_args=""
if [ $# -gt 0 ]; then pytest_args=$(printf '%q ' "$@"); fi
stages=(make -k PYTHON="$PYTHON" DURATIONS=25 PYTEST_ARGS="$pytest_args")

bash hack/install.sh
"${stages[@]}" check
bash hack/build-control-plane.sh
bash hack/build-kubeflow.sh  # Kubeflow itself, for tests/differential
bash hack/build-jobset.sh  # the real JobSet controller, for tests/e2e/test_e2e_jobset.py
bash hack/build-trainer.sh  # Kubeflow Trainer v2.3.0, for tests/e2e/test_e2e_trainer_jobsets.py
# The real-node tier (tests/e2e_node): kubelet, kube-proxy, CoreDNS, containerd; the examples' images.
bash hack/build-node.sh
bash hack/build-kube-router.sh  # the NetworkPolicy enforcer of tests/e2e_node/test_networkpolicy.py
# The browser tier (tests/ui_browser): Debian's chromium and playwright.
bash hack/install-browser.sh

# The examples' images take about 12 minutes cold (the torch one alone 5) and only the node and image
# tiers use them, so they build while the hermetic unit tier runs; the build writes its own log.
images_log="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/logs/build-training-images.log"
mkdir -p "$(dirname "$images_log")"
echo "examples' images: hack/build-training-images.sh, beside the unit tier (log: $images_log)"
bash hack/build-training-images.sh >"$images_log" 2>&1 &
images=$!

# Every tier and the volume fuzz, each even after another failed (-k), so one run reports them all;
# make exits non-zero if any failed, and any pytest exit but 0 fails its stage (5, nothing collected, too).
failed=0
"${stages[@]}" unit || failed=1
if ! wait "$images"; then
  echo "hack/build-training-images.sh failed; the end of $images_log:" >&2
  tail -n 40 "$images_log" >&2
  failed=1
fi
"${stages[@]}" after-unit || failed=1
exit "$failed"
