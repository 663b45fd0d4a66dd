# shellcheck shell=bash
# Sourced by the hack/ build scripts: a Go module that can build commands of k8s.io/kubernetes.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 through ./staging replaces that only work
# inside its own repository, so `go install k8s.io/kubernetes/cmd/...@v` is refused. A wrapper module
# that replaces each staging module by its published v0.<minor>.<patch> builds the commands unchanged.
# Callers need GOTOOLCHAIN/CGO_ENABLED/GOFLAGS exported and `log` defined.

# The Kubernetes version of the control plane and of the node's kubelet and kube-proxy: one, so that
# the node never runs against an apiserver of another version.
# shellcheck disable=SC2034
K8S_VERSION="1.36.3"

# k8s_wrapper_module DIR VERSION: create (or reuse) the wrapper module in DIR and cd into it.
k8s_wrapper_module() {
  local w="$1" version="$2"
  local staging="v0.${version#1.}"
  mkdir -p "$w" && cd "$w" || return
  [ -f go.mod ] || go mod init e2e.invalid/k8sbins
  local kmod
  kmod="$(go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@v$version")"
  # Derived from kubernetes' own go.mod so that a version bump needs no edits here.
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
}

# k8s_version_ldflags VERSION: -ldflags that stamp the version like kubernetes' hack/lib/version.sh.
# Unstamped binaries report v0.0.0-master, which breaks kubectl skew checks, helm capabilities and the
# kubelet's version skew against the apiserver.
k8s_version_ldflags() {
  local version="$1" minor date ld="-s -w" p
  minor="${version#1.}"; minor="${minor%%.*}"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  printf '%s' "$ld"
}
