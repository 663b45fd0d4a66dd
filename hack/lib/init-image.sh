# shellcheck shell=bash
# Sourced by hack/build-node.sh (the real-node tier's toolbox) and hack/release.sh (the shipped
# trainop-init image): one recipe, so the image a release pins is the one the node tier's jobs run.
#
#   build_init_image WORK KUBECTL DEB_CACHE LAYOUT REF
#
# writes into the OCI layout LAYOUT, under REF (repository:tag), the init image of tenants' pods: the
# PyTorch workers' DNS wait (Kubeflow's --pytorch-init-container-image) and the MPI launchers'
# kubectl-delivery (--mpi-kubectl-delivery-image), its entrypoint. It holds Debian's busybox-static,
# Debian's dash as /bin/sh, a Go nslookup that honours the search list, the KUBECTL given and the
# kubectl-delivery script. WORK is a scratch folder (emptied, then removed); the busybox-static package
# is taken from DEB_CACHE, downloaded there (apt-get download) only when missing, so a release cut after
# the node build fetches nothing. Same inputs, same image: the layer is written with sorted names, mtime 0
# and uid 0, and the nslookup is built with -trimpath. Needs Go on PATH (hack/lib/toolchains.sh).

INIT_IMAGE_LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

build_init_image() {
  local w="$1" kubectl="$2" debs="$3" layout="$4" ref="$5" deb
  [ -x "$kubectl" ] || { echo "no kubectl at $kubectl: run hack/build-control-plane.sh" >&2; return 1; }
  rm -rf "$w" && mkdir -p "$w/deb" "$w/root/bin" "$w/root/usr/local/bin" "$w/root/tmp" "$debs"
  deb="$(find "$debs" -maxdepth 1 -name 'busybox-static_*.deb' | LC_ALL=C sort | tail -n 1)"
  if [ -z "$deb" ]; then
    ( cd "$debs" && apt-get download busybox-static )
    deb="$(find "$debs" -maxdepth 1 -name 'busybox-static_*.deb' | LC_ALL=C sort | tail -n 1)"
  fi
  echo "busybox: $deb"
  dpkg-deb -x "$deb" "$w/deb/x"
  cp "$w/deb/x/bin/busybox" "$w/root/bin/busybox"
  local applet
  for applet in $("$w/root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -s busybox "$w/root/bin/$applet"
  done
  cp "$kubectl" "$w/root/usr/local/bin/kubectl"
  # Kubeflow's PyTorch init container runs `nslookup <master>` (a short name) until it succeeds, and pins
  # alpine:3.10 because later busybox nslookups fail on names that need the search list. Debian's busybox
  # is such a later one, so the image's nslookup (first on PATH) is Go's resolver: search list and
  # ndots from /etc/resolv.conf, exit 0 once the name resolves, busybox's output format. /bin/sh is
  # Debian's dash (with the libc it links), not busybox's ash: the static busybox's shell runs its own
  # applets before searching PATH, so `sh -c 'nslookup ...'` would never reach the Go one.
  rm "$w/root/bin/sh"
  local lib
  for lib in /usr/bin/dash $(ldd /usr/bin/dash | grep -o '/[^ ]*'); do
    mkdir -p "$w/root$(dirname "$lib")"
    cp -L "$lib" "$w/root$lib"
  done
  ln -s /usr/bin/dash "$w/root/bin/sh"
  mkdir -p "$w/nslookup"
  cat >"$w/nslookup/main.go" <<'EOF'
package main

import (
	"fmt"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nslookup NAME")
		os.Exit(2)
	}
	addrs, err := net.LookupHost(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "** server can't find %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Printf("Name:\t%s\n", os.Args[1])
	for _, a := range addrs {
		fmt.Printf("Address: %s\n", a)
	}
}
EOF
  printf 'module e2e.invalid/nslookup\n\ngo 1.24\n' >"$w/nslookup/go.mod"
  ( cd "$w/nslookup" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false" \
      go build -trimpath -ldflags "-s -w" -o "$w/root/usr/local/bin/nslookup" . )
  # Kubeflow's kubectl-delivery (mpi-operator v1): put kubectl where the launcher's kubexec.sh calls it,
  # then hold the launcher back until every worker of the hostfile runs, so mpirun's first exec works.
  cat >"$w/root/usr/local/bin/kubectl-delivery" <<'EOF'
#!/bin/sh
set -eu
: "${TARGET_DIR:?}" "${NAMESPACE:?}"
cp /usr/local/bin/kubectl "$TARGET_DIR/kubectl"
echo "kubectl delivered to $TARGET_DIR"
for host in $(awk '{print $1}' /etc/mpi/hostfile); do
  pod="${host%%.*}"
  until [ "$(kubectl get pod "$pod" -n "$NAMESPACE" -o 'jsonpath={.status.phase}' 2>/dev/null)" = Running ]; do
    sleep 1
  done
  echo "worker $pod is running"
done
EOF
  chmod 0755 "$w/root/usr/local/bin/kubectl-delivery"
  chmod 1777 "$w/root/tmp"
  tar -C "$w/root" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$w/layer.tar" .
  "${PYTHON:-python3}" "$INIT_IMAGE_LIB/oci_layout.py" --layout "$layout" --ref "$ref" \
    --entrypoint /usr/local/bin/kubectl-delivery "$w/layer.tar"
  rm -rf "$w"
}
