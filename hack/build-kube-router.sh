#!/usr/bin/env bash
# The build_* functions are called indirectly through run_piece.
# shellcheck disable=SC2317
# Builds the NetworkPolicy enforcer of the real-node tier (tests/e2e_node/test_networkpolicy.py) into the
# cache OUTSIDE the repo (${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}):
#   bin/kube-router   kube-router from the Go module proxy; the tier runs only its network policy
#                     controller (iptables + ipset), the one enforcer this machine's kernel can run
#                     (docs/build.md#real-node and the test's docstring say why)
# and installs the Debian package it shells out to: ipset.
# Its own script, not a piece of hack/build-node.sh: only the NetworkPolicy test needs it, and a cold
# build takes minutes on two cores. The test tier only: never shipped, never run outside loopback.
# Stamps and logs work like in hack/build-node.sh: a piece is reused only when its stamp names the
# wanted version.
set -euo pipefail
HACK="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=hack/lib/toolchains.sh
. "$HACK/lib/toolchains.sh"

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
BIN="$CACHE/bin"
KUBE_ROUTER_VERSION="2.1.0"
DEBS="ipset"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false -p=2"
mkdir -p "$BIN"

# shellcheck source=hack/lib/pieces.sh
. "$HACK/lib/pieces.sh"

take_lock "$CACHE/.kube-router-build.lock"

# ---------------------------------------------------------------------------------------------
install_debs() {
  # shellcheck disable=SC2086 # DEBS is a list of package names
  install_missing_debs $DEBS || return
  ipset --version
}

# ---------------------------------------------------------------------------------------------
build_kube_router() {
  stamp_ok kube-router "$KUBE_ROUTER_VERSION" kube-router && {
    log "kube-router v$KUBE_ROUTER_VERSION cached"; return 0; }
  clear_stamp kube-router
  local tmp="$CACHE/.kube-router-bin.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # Upstream's Makefile sets these for `kube-router --version`.
  local pkg="github.com/cloudnativelabs/kube-router/v2/pkg/version"
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X $pkg.Version=v$KUBE_ROUTER_VERSION -X $pkg.BuildDate=module-proxy" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v$KUBE_ROUTER_VERSION"
  "$tmp/kube-router" --version
  mv "$tmp/kube-router" "$BIN/kube-router"
  rm -rf "$tmp"
  write_stamp kube-router "$KUBE_ROUTER_VERSION"
}

# ---------------------------------------------------------------------------------------------
run_piece kube-router-debs install_debs
run_piece kube-router build_kube_router
print_summary "kube-router build summary"
exit "$FAILED"
