#!/usr/bin/env bash
# The build_* functions are called indirectly through run_piece.
# shellcheck disable=SC2317
# Builds what the real-node test tier (tests/e2e_node) needs on top of hack/build-control-plane.sh, into
# the same cache OUTSIDE the repo (${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}):
#   bin/kubelet, bin/kube-proxy   the k8s.io/kubernetes wrapper module (hack/lib/k8s-wrapper.sh), same
#                                 version as the control plane
#   bin/coredns                   CoreDNS from the Go module proxy
#   images/oci                    an OCI image layout, served to containerd by the tier's pull-only
#                                 loopback registry (tests/e2e_node/registry.py), holding
#     trainop-e2e/pause           the sandbox image: a static Go program that sleeps and reaps children
#     trainop-e2e/toolbox         the trainop-init image a release ships (hack/lib/init-image.sh: busybox,
#                                 kubectl, a Go nslookup): Kubeflow's kubectl-delivery init container for
#                                 MPI launchers and the PyTorch DNS-wait init container; the tests' busybox
#     metacontroller/metacontroller  upstream's image (ghcr.io/metacontroller/metacontroller:v<version>, the
#                                 chart's default; the node's containerd resolves ghcr.io here too): the
#                                 static binary hack/build-control-plane.sh built from the vendored source,
#                                 uid/gid 65532 "nonroot", the host's CA bundle, as upstream's Dockerfile
#   (the training images are added to the same layout by hack/build-training-images.sh)
# and installs the Debian packages of the node: containerd, runc, the CNI plugins, iptables, conntrack.
# Why the recipe looks like this: docs/build.md#real-node; measured times: tests/e2e_node/README.md.
# Stamps and logs work like in build-control-plane.sh: a piece is reused only when its stamp names the
# wanted version.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/lib/toolchains.sh
. "$HACK/lib/toolchains.sh"
# shellcheck source=hack/lib/k8s-wrapper.sh
. "$HACK/lib/k8s-wrapper.sh"
# shellcheck source=hack/lib/init-image.sh
. "$HACK/lib/init-image.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
SRC="$CACHE/src"
LAYOUT="$CACHE/images/oci"
PYTHON="${PYTHON:-python3}"

COREDNS_VERSION="1.14.7"
# The tags of the images built here; bump one when its content changes (tests/e2e_node reads them from
# the stamps).
PAUSE_VERSION="3.10"
TOOLBOX_VERSION="4"
DEBS="containerd runc containernetworking-plugins iptables conntrack"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
mkdir -p "$BIN" "$SRC" "$LAYOUT"

# shellcheck source=hack/lib/pieces.sh
. "$(dirname "$0")/lib/pieces.sh"

# Its own lock, not the control plane build's: the e2e suite runs that script before every session and
# must not wait through a ten-minute node build.
take_lock "$CACHE/.node-build.lock"

# An image's stamp holds only if the layout still names it: index.json has other writers.
in_layout() { "$PYTHON" "$HACK/lib/oci_layout.py" has --layout "$LAYOUT" "$1"; } # repository:tag

# ---------------------------------------------------------------------------------------------
install_debs() {
  # shellcheck disable=SC2086 # DEBS is a list of package names
  install_missing_debs $DEBS || return
  # The package enables a system containerd under systemd; there is no systemd here, and the tests
  # run their own containerd with their own config and state anyway.
  containerd --version && runc --version && iptables --version
}

# ---------------------------------------------------------------------------------------------
build_node_k8s() {
  stamp_ok node-k8s "$K8S_VERSION" kubelet kube-proxy && {
    log "kubelet, kube-proxy v$K8S_VERSION cached"; return 0; }
  clear_stamp node-k8s
  # Its own wrapper module: adding tools to the control plane's would rebuild them there too.
  k8s_wrapper_module "$SRC/kubernetes-node-$K8S_VERSION" "$K8S_VERSION"
  go get -tool "k8s.io/kubernetes/cmd/kubelet@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-proxy@v$K8S_VERSION"
  local tmp="$CACHE/.node-bin.tmp" b
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath -ldflags "$(k8s_version_ldflags "$K8S_VERSION")" tool
  for b in kubelet kube-proxy; do "$tmp/$b" --version; done
  for b in kubelet kube-proxy; do mv "$tmp/$b" "$BIN/$b"; done
  rm -rf "$tmp"
  write_stamp node-k8s "$K8S_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_coredns() {
  stamp_ok coredns "$COREDNS_VERSION" coredns && { log "coredns v$COREDNS_VERSION cached"; return 0; }
  clear_stamp coredns
  local tmp="$CACHE/.coredns-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@v$COREDNS_VERSION"
  "$tmp/coredns" -version
  mv "$tmp/coredns" "$BIN/coredns"
  rm -rf "$tmp"
  write_stamp coredns "$COREDNS_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_pause() {
  stamp_ok pause "$PAUSE_VERSION" && in_layout "trainop-e2e/pause:$PAUSE_VERSION" && { log "pause image cached"; return 0; }
  clear_stamp pause
  # Registries are unreachable, so the sandbox image is built here: sleep until TERM/INT, reap children.
  local w="$SRC/pause"
  rm -rf "$w" && mkdir -p "$w/root"
  cat >"$w/main.go" <<'EOF'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
EOF
  printf 'module e2e.invalid/pause\n\ngo 1.24\n' >"$w/go.mod"
  ( cd "$w" && go build -trimpath -ldflags "-s -w" -o root/pause . )
  tar -C "$w/root" --owner=0 --group=0 --numeric-owner -cf "$w/layer.tar" pause
  "$PYTHON" "$HACK/lib/oci_layout.py" --layout "$LAYOUT" --ref "trainop-e2e/pause:$PAUSE_VERSION" \
    --entrypoint /pause "$w/layer.tar"
  rm -rf "$w"
  write_stamp pause "$PAUSE_VERSION"
}

# ---------------------------------------------------------------------------------------------
build_toolbox() {
  local kubectl_version
  kubectl_version="$(cat "$BIN/.stamp-kubectl")"
  local want="$TOOLBOX_VERSION-kubectl$kubectl_version"
  stamp_ok toolbox "$want" && in_layout "trainop-e2e/toolbox:$want" && { log "toolbox image cached"; return 0; }
  clear_stamp toolbox
  build_init_image "$SRC/toolbox" "$BIN/kubectl" "$CACHE/debs" "$LAYOUT" "trainop-e2e/toolbox:$want"
  "$PYTHON" "$HACK/lib/oci_layout.py" prune --layout "$LAYOUT" \
    --drop-prefix "trainop-e2e/toolbox:" --keep "trainop-e2e/toolbox:$want"
  write_stamp toolbox "$want"
}

# ---------------------------------------------------------------------------------------------
build_metacontroller_image() {
  local built version digest
  built="$(stamp_of metacontroller)"
  version="${built%% *}"
  case "$built" in
    *" static") ;;
    *) echo "no static metacontroller in $BIN (stamp: '$built'): run hack/build-control-plane.sh" >&2; return 1 ;;
  esac
  digest="$(sha256sum "$BIN/metacontroller")"
  local want="v$version ${digest:0:16}"
  stamp_ok metacontroller-image "$want" && in_layout "metacontroller/metacontroller:v$version" && { log "metacontroller image cached"; return 0; }
  clear_stamp metacontroller-image
  # The image's root filesystem has no libc: a dynamically linked binary would not start in it.
  if ldd "$BIN/metacontroller" >/dev/null 2>&1; then
    echo "$BIN/metacontroller is dynamically linked" >&2; return 1
  fi
  local w="$SRC/metacontroller-image"
  rm -rf "$w" && mkdir -p "$w/root/usr/bin" "$w/root/etc/ssl/certs" "$w/root/tmp"
  cp "$BIN/metacontroller" "$w/root/usr/bin/metacontroller"
  cp /etc/ssl/certs/ca-certificates.crt "$w/root/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$w/root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$w/root/etc/group"
  chmod 1777 "$w/root/tmp"
  tar -C "$w/root" --owner=0 --group=0 --numeric-owner -cf "$w/layer.tar" .
  "$PYTHON" "$HACK/lib/oci_layout.py" --layout "$LAYOUT" --ref "metacontroller/metacontroller:v$version" \
    --cmd /usr/bin/metacontroller --user 65532:65532 "$w/layer.tar"
  rm -rf "$w"
  write_stamp metacontroller-image "$want"
}

# ---------------------------------------------------------------------------------------------
[ -x "$BIN/kubectl" ] || { echo "no $BIN/kubectl: run hack/build-control-plane.sh first" >&2; exit 1; }
run_piece node-debs install_debs
run_piece pause build_pause
run_piece toolbox build_toolbox
run_piece metacontroller-image build_metacontroller_image
run_piece coredns build_coredns
run_piece node-k8s build_node_k8s
print_summary "node build summary"
exit "$FAILED"
