#!/usr/bin/env bash
# Builds Kubeflow Trainer v2.3.0's controller manager, the reference the TrainJob differential test runs
# beside trainop, into the same cache as hack/build-control-plane.sh:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/bin/trainer-manager
# plus, next to bin/: $CACHE/trainer/crds/*.yaml (its three CRDs), $CACHE/trainer/runtimes/ (the runtimes
# it ships), $CACHE/trainer/webhook/ (its webhook configurations and their kustomize patches) and $CACHE/trainer/rbac/role.yaml.
#
# Source (docs/build.md#trainer-from-source): an unmodified snapshot of the tag (TRAINOP_TRAINER_SRC, else
# shared/vendor/ beside the repository's directory, if there; copied to a writable folder first), else a
# clone of the public tag. Its dependencies come from the Go module proxy. ~2-4 min on 2 cores with Go's
# cache warm from JobSet's build, <1 s when built. Stamp, lock and log as in hack/build-jobset.sh.
set -euo pipefail
# shellcheck source=hack/lib/toolchains.sh
. "$(dirname "$0")/lib/toolchains.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
OUT="$CACHE/trainer"
TRAINER_VERSION="2.3.0"
TRAINER_VENDOR="${TRAINOP_TRAINER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/shared/vendor/kubeflow-trainer-v$TRAINER_VERSION}"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
export NO_PROXY="${NO_PROXY:-127.0.0.1,localhost}"

mkdir -p "$BIN" "$SRC"
# shellcheck source=hack/lib/pieces.sh
. "$(dirname "$0")/lib/pieces.sh"
take_lock "$CACHE/.build-trainer.lock"

if stamp_ok trainer "$TRAINER_VERSION" trainer-manager && [ -d "$OUT/crds" ] && [ -d "$OUT/runtimes" ] \
  && [ -f "$OUT/webhook/patch_validating.yaml" ]; then
  log "trainer v$TRAINER_VERSION cached"
  exit 0
fi

build() {
  clear_stamp trainer
  local w="$SRC/trainer-$TRAINER_VERSION"
  fetch_source "$w" "$TRAINER_VENDOR" manifests/base/crds https://github.com/kubeflow/trainer "v$TRAINER_VERSION"
  cd "$w"
  go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/trainer-manager.tmp" ./cmd/trainer-controller-manager
  # Prove the binary runs before it takes the real name (Go's flag package exits 0 on -help).
  "$BIN/trainer-manager.tmp" -help >"$CACHE/.trainer-help.txt" 2>&1 || true
  grep -q -- '-feature-gates' "$CACHE/.trainer-help.txt" || { cat "$CACHE/.trainer-help.txt"; return 1; }
  rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp/crds" "$OUT.tmp/webhook" "$OUT.tmp/rbac" "$OUT.tmp/runtimes"
  cp manifests/base/crds/trainer.kubeflow.org_*.yaml "$OUT.tmp/crds/"
  cp manifests/base/webhook/manifests.yaml manifests/base/webhook/patch_*.yaml "$OUT.tmp/webhook/"
  cp manifests/base/rbac/role.yaml "$OUT.tmp/rbac/"
  find manifests/base/runtimes -name '*.yaml' ! -name kustomization.yaml -exec cp {} "$OUT.tmp/runtimes/" \;
  chmod -R u+w "$OUT.tmp"
  rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
  mv "$BIN/trainer-manager.tmp" "$BIN/trainer-manager"
  write_stamp trainer "$TRAINER_VERSION"
}

log "=== trainer v$TRAINER_VERSION: start (log: $CACHE/logs/trainer.log)"
step trainer build
log "built $BIN/trainer-manager"
