#!/usr/bin/env bash
# Builds JobSet v0.12.0's controller manager, the controller a TrainJob's JobSet is run by, into the same
# cache as hack/build-control-plane.sh:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/bin/jobset-manager
# plus what a test needs to run it out of cluster, next to bin/:
#   $CACHE/jobset/crds/*.yaml (its CRD), $CACHE/jobset/webhook/*.yaml (its webhook configurations, with
#   the pod webhooks' objectSelector of its kustomize patches), $CACHE/jobset/rbac/role.yaml
#
# Source (docs/build.md#jobset-from-source): an unmodified snapshot of the tag (TRAINOP_JOBSET_SRC, else
# shared/vendor/ beside the repository's directory, if there; copied to a writable folder first:
# `go build -mod=mod` writes go.sum), else a clone of the public tag. Its dependencies come from the Go
# module proxy. ~2-5 min on 2 cores with Go's cache warm from the control plane, <1 s when built.
#
# The stamp and the log work as in hack/build-control-plane.sh (hack/lib/pieces.sh): the build logs to
# $CACHE/logs/jobset.log, and on failure the script prints that log's tail and exits non-zero.
set -euo pipefail
# shellcheck source=hack/lib/toolchains.sh
. "$(dirname "$0")/lib/toolchains.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
OUT="$CACHE/jobset"
JOBSET_VERSION="0.12.0"
JOBSET_VENDOR="${TRAINOP_JOBSET_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/shared/vendor/jobset-v$JOBSET_VERSION}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
export NO_PROXY="${NO_PROXY:-127.0.0.1,localhost}"

mkdir -p "$BIN" "$SRC"
# shellcheck source=hack/lib/pieces.sh
. "$(dirname "$0")/lib/pieces.sh"
take_lock "$CACHE/.build-jobset.lock"

if stamp_ok jobset "$JOBSET_VERSION" jobset-manager && [ -d "$OUT/crds" ] && [ -d "$OUT/webhook" ]; then
  log "jobset v$JOBSET_VERSION cached"
  exit 0
fi

build() {
  clear_stamp jobset
  local w="$SRC/jobset-$JOBSET_VERSION"
  fetch_source "$w" "$JOBSET_VENDOR" config/components/crd https://github.com/kubernetes-sigs/jobset "v$JOBSET_VERSION"
  cd "$w"
  go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/jobset-manager.tmp" .
  # Prove the binary runs before it takes the real name (Go's flag package exits 0 on -help).
  "$BIN/jobset-manager.tmp" -help >"$CACHE/.jobset-help.txt" 2>&1 || true
  grep -q -- '-kube-api-qps' "$CACHE/.jobset-help.txt" || { cat "$CACHE/.jobset-help.txt"; return 1; }
  rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp/crds" "$OUT.tmp/webhook" "$OUT.tmp/rbac"
  cp config/components/crd/bases/*.yaml "$OUT.tmp/crds/"
  cp config/components/webhook/manifests.yaml config/components/webhook/patches/*.yaml "$OUT.tmp/webhook/"
  cp config/components/rbac/role.yaml "$OUT.tmp/rbac/"
  chmod -R u+w "$OUT.tmp"
  rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
  mv "$BIN/jobset-manager.tmp" "$BIN/jobset-manager"
  write_stamp jobset "$JOBSET_VERSION"
}

log "=== jobset v$JOBSET_VERSION: start (log: $CACHE/logs/jobset.log)"
step jobset build
log "built $BIN/jobset-manager"
