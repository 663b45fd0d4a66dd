#!/usr/bin/env bash
# Builds Kubeflow Training Operator v1.9.4's `training-operator` binary, the reference the differential
# test (tests/differential) runs beside our stack, into the same cache as hack/build-control-plane.sh:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/bin/training-operator
# plus its six CRDs (from its manifests/) and its examples/ next to bin/, so a test needs nothing else:
#   $CACHE/kubeflow/crds/*.yaml, $CACHE/kubeflow/examples/...
#
# Source (docs/build.md#kubeflow-from-source): an unmodified snapshot of the tag (TRAINOP_KUBEFLOW_SRC,
# else shared/vendor/ beside the repository's directory, if there; copied to a writable folder first:
# `go build -mod=mod` writes go.sum), else a clone of the public tag. Its dependencies come from the Go
# module proxy. ~5 min cold on 2 cores, <1 s warm.
#
# The stamp is removed before a build starts and written only after the built binary has run, so a
# half-finished build is never reused. The build logs to $CACHE/logs/kubeflow.log; on failure the
# script prints that log's tail and exits non-zero. No output is piped into a reader that may stop
# early (`| head`), which under pipefail would fail a good build.
set -euo pipefail
# shellcheck source=hack/lib/toolchains.sh
. "$(dirname "$0")/lib/toolchains.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
LOGS="$CACHE/logs"
OUT="$CACHE/kubeflow"
KF_VERSION="1.9.4"
KF_VENDOR="${TRAINOP_KUBEFLOW_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/shared/vendor/kubeflow-training-operator-v$KF_VERSION}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
export NO_PROXY="${NO_PROXY:-127.0.0.1,localhost}"

mkdir -p "$BIN" "$SRC" "$LOGS"
log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# Its own lock: two runs of this script must not share the work folder, but it need not wait for
# the control-plane build.
exec 9>"$CACHE/.build-kubeflow.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.build-kubeflow.lock; waiting"
  flock 9
fi

STAMP="$BIN/.stamp-kubeflow"
if [ "$(cat "$STAMP" 2>/dev/null || true)" = "$KF_VERSION" ] && [ -x "$BIN/training-operator" ] \
   && [ -d "$OUT/crds" ] && [ -d "$OUT/examples" ]; then
  log "kubeflow training-operator v$KF_VERSION cached"
  exit 0
fi

build() {
  rm -f "$STAMP"
  local w="$SRC/kubeflow-training-operator-$KF_VERSION"
  rm -rf "$w"
  if [ -d "$KF_VENDOR/cmd/training-operator.v1" ]; then
    log "source: $KF_VENDOR"
    cp -r "$KF_VENDOR" "$w"
    chmod -R u+w "$w"
  else
    log "source: git clone of tag v$KF_VERSION"
    git clone --quiet --depth 1 --branch "v$KF_VERSION" https://github.com/kubeflow/training-operator "$w"
  fi
  cd "$w"
  go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/training-operator.tmp" ./cmd/training-operator.v1
  # Prove the binary runs before it takes the real name (Go's flag package exits 0 on -help).
  "$BIN/training-operator.tmp" -help >"$CACHE/.training-operator-help.txt" 2>&1 || true
  grep -q -- '-enable-scheme' "$CACHE/.training-operator-help.txt" || {
    cat "$CACHE/.training-operator-help.txt"; return 1; }
  rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
  cp -r manifests/base/crds "$OUT.tmp/crds"
  rm -f "$OUT.tmp/crds/kustomization.yaml"
  cp -r examples "$OUT.tmp/examples"
  chmod -R u+w "$OUT.tmp"
  rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
  mv "$BIN/training-operator.tmp" "$BIN/training-operator"
  printf '%s\n' "$KF_VERSION" >"$STAMP.tmp" && mv "$STAMP.tmp" "$STAMP"
}

t0="$(date +%s)"
log "=== kubeflow training-operator v$KF_VERSION: start (log: $LOGS/kubeflow.log)"
set +e
( set -euo pipefail; build ) >"$LOGS/kubeflow.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  log "=== kubeflow: FAILED rc=$rc ($(($(date +%s) - t0))s); last lines of $LOGS/kubeflow.log:"
  tail -n 40 "$LOGS/kubeflow.log" >&2
  exit "$rc"
fi
log "=== kubeflow: ok ($(($(date +%s) - t0))s) -> $BIN/training-operator"
