#!/usr/bin/env bash
# Cuts a release into dist/VERSION/ (docs/release.md), offline, from this work tree:
#
#   hack/release.sh VERSION [--base-url URL] [--dist DIR] [--unsigned]
#
# VERSION is MAJOR.MINOR.PATCH (e.g. 0.2.0). First it writes VERSION into every file that names the
# version (hack/lib/versions.py: pyproject.toml, trainop/__init__.py, the chart, the manifests, the
# README's install commands), so the package, the chart and the images agree; releasing the version
# pyproject.toml already holds changes no file. Then it writes dist/VERSION/:
#
#   trainop.yaml                   the install manifest: `kubectl kustomize manifests/` plus Metacontroller
#                                  (as the chart's values configure it, in namespace metacontroller),
#                                  every image pinned by the digest of the archive in images/
#   trainop-crds.yaml              every CRD of trainop.yaml (apply and wait for Established first)
#   trainop-VERSION.tgz            the Helm chart with its Metacontroller dependency inside, its default
#                                  values naming the images of images/ by digest
#   images/*.oci.tar               the project's image (hack/build-image.sh), the TensorBoard image
#                                  (hack/build-tensorboard-image.sh), the init image of tenants' pods
#                                  (trainop-init: hack/lib/init-image.sh, as the node build's toolbox) and
#                                  Metacontroller's (hack/build-node.sh)
#   examples/NAME.yaml             `trainop examples show NAME` for every packaged example
#   training-images.tar.gz         the examples' images' build context (training-images/), for
#                                  `docker build --build-arg FRAMEWORK=NAME URL` without a clone
#   trainop-VERSION-py3-none-any.whl, trainop-VERSION.tar.gz    the Python package
#   RELEASE-NOTES.md               docs/releases/VERSION.md if present, the images' digests, and the commits
#                                  since the previous v* tag (every commit for the first release)
#   SHA256SUMS                     over every file above (`sha256sum -c SHA256SUMS` in dist/VERSION/)
#   SHA256SUMS.sig                 an SSH signature of SHA256SUMS by the private key file
#                                  $TRAINOP_RELEASE_SIGNING_KEY (hack/lib/release-signature.sh; verify it
#                                  against the project's published allowed_signers). Without that key the
#                                  release is refused unless --unsigned says it is meant to be unsigned.
#
# and, over every release in DIR: index.yaml (a Helm repository with relative URLs, so `helm repo add
# trainop http://HOST/` works wherever DIR is served) and index.html (every release with its install
# commands; --base-url is where DIR is served, default a placeholder the page explains).
#
# Needs what CI builds anyway: helm, kubectl and the Metacontroller chart (hack/build-control-plane.sh),
# the Metacontroller image and the busybox-static package (hack/build-node.sh), Go, podman for the
# project's image (hack/build-image.sh, root).
# DIR defaults to dist/ (git-ignored). Progress goes to stderr; the last line on stdout is dist/VERSION.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; }

VERSION="" BASE_URL="" DIST="$REPO/dist" UNSIGNED=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base-url) [ $# -ge 2 ] || { echo "--base-url needs a URL" >&2; exit 2; }; BASE_URL="$2"; shift 2 ;;
    --base-url=*) BASE_URL="${1#--base-url=}"; shift ;;
    --dist) [ $# -ge 2 ] || { echo "--dist needs a directory" >&2; exit 2; }; DIST="$2"; shift 2 ;;
    --dist=*) DIST="${1#--dist=}"; shift ;;
    --unsigned) UNSIGNED=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$VERSION" ] || { echo "one VERSION only; got $VERSION and $1" >&2; exit 2; }; VERSION="$1"; shift ;;
  esac
done
[ -n "$VERSION" ] || { echo "usage: hack/release.sh VERSION [--base-url URL] [--dist DIR] [--unsigned] (see --help)" >&2; exit 2; }
"$PYTHON" "$REPO/hack/lib/versions.py" valid "$VERSION" || exit 2
SIGNING_KEY="${TRAINOP_RELEASE_SIGNING_KEY:-}"
if [ -z "$UNSIGNED" ]; then
  [ -n "$SIGNING_KEY" ] || { echo "TRAINOP_RELEASE_SIGNING_KEY is not set: the path of the SSH private key that signs SHA256SUMS; pass --unsigned for a release without a signature" >&2; exit 2; }
  [ -r "$SIGNING_KEY" ] || { echo "TRAINOP_RELEASE_SIGNING_KEY=$SIGNING_KEY is not a readable file" >&2; exit 2; }
fi
if [ -n "$BASE_URL" ]; then
  case "$BASE_URL" in http://?*|https://?*) ;; *) echo "--base-url must be an http(s) URL; got $BASE_URL" >&2; exit 2 ;; esac
fi

CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
HELM="$CACHE/bin/helm"
KUBECTL="$CACHE/bin/kubectl"
MC_VERSION="4.17.2"
MC_CHART="$CACHE/charts/metacontroller-helm-$MC_VERSION.tgz"
LAYOUT="$CACHE/images/oci"
MC_LAYOUT_REF="metacontroller/metacontroller:v$MC_VERSION"
MC_REPO="ghcr.io/metacontroller/metacontroller"
for need in "$HELM" "$KUBECTL" "$MC_CHART"; do
  [ -e "$need" ] || { echo "$need is missing: run hack/build-control-plane.sh" >&2; exit 1; }
done
"$PYTHON" "$REPO/hack/lib/oci_layout.py" has --layout "$LAYOUT" "$MC_LAYOUT_REF" \
  || { echo "$MC_LAYOUT_REF is not in $LAYOUT: run hack/build-node.sh" >&2; exit 1; }

LOG_FD=2
# shellcheck source=hack/lib/pieces.sh
. "$REPO/hack/lib/pieces.sh"
# shellcheck source=hack/lib/toolchains.sh
. "$REPO/hack/lib/toolchains.sh"
# shellcheck source=hack/lib/init-image.sh
. "$REPO/hack/lib/init-image.sh"
mkdir -p "$DIST"
DIST="$(cd "$DIST" && pwd)"
take_lock "$DIST/.release.lock"
OUT="$DIST/$VERSION"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/trainop-release.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)

cd "$REPO"
"$PYTHON" hack/lib/versions.py set "$VERSION"
rm -rf "$OUT" "$DIST/.partial-$VERSION"
STAGE="$DIST/.partial-$VERSION"  # renamed to dist/VERSION once complete
mkdir -p "$STAGE/images" "$STAGE/examples"

# --------------------------------------------------------------------------------------------- images
archive() { # name ref docker-archive: the OCI archive, then `REPOSITORY DIGEST` on stdout
  local out="$STAGE/images/$1-$VERSION.oci.tar" line
  line="$("$PYTHON" hack/lib/oci_archive.py from-docker-archive --ref "$2" "$3" "$out")"
  rm -f "$3"
  echo "${2%:*} ${line##* }"
}
log "project image: hack/build-image.sh"
bash hack/build-image.sh --save "$WORK/trainop.docker.tar" >/dev/null
read -r APP_REPO APP_DIGEST < <(archive trainop "docker.io/library/trainop:$VERSION" "$WORK/trainop.docker.tar")
PINS=(--pin "$APP_REPO=$APP_DIGEST")
IMAGES=("$APP_REPO:$VERSION@$APP_DIGEST")
log "TensorBoard image: hack/build-tensorboard-image.sh"
bash hack/build-tensorboard-image.sh --save "$WORK/tensorboard.docker.tar" >/dev/null
read -r TB_REPO TB_DIGEST < <(archive trainop-tensorboard "docker.io/library/trainop-tensorboard:$VERSION" \
                                "$WORK/tensorboard.docker.tar")
TB_ARGS=(--tensorboard "$TB_REPO@$TB_DIGEST")
IMAGES+=("$TB_REPO:$VERSION@$TB_DIGEST")
# The init containers the hooks give tenants' pods (PyTorch workers' DNS wait, MPI launchers'
# kubectl-delivery), built into a layout of its own: the node's is served to other tests meanwhile.
log "init image: hack/lib/init-image.sh"
INIT_REPO="docker.io/library/trainop-init"
# `step`: its own log ($CACHE/logs/init-image.log), errexit inside the function, the run stops on failure.
step init-image build_init_image "$WORK/init" "$KUBECTL" "$CACHE/debs" "$WORK/init-layout" "trainop-init:$VERSION"
init_line="$("$PYTHON" hack/lib/oci_archive.py from-layout --layout "$WORK/init-layout" \
             --source "trainop-init:$VERSION" --ref "$INIT_REPO:$VERSION" "$STAGE/images/trainop-init-$VERSION.oci.tar")"
INIT_DIGEST="${init_line##* }"
IMAGES+=("$INIT_REPO:$VERSION@$INIT_DIGEST")
mc_line="$("$PYTHON" hack/lib/oci_archive.py from-layout --layout "$LAYOUT" --source "$MC_LAYOUT_REF" \
           --ref "$MC_REPO:v$MC_VERSION" "$STAGE/images/metacontroller-v$MC_VERSION.oci.tar")"
MC_DIGEST="${mc_line##* }"
PINS+=(--pin "$MC_REPO=$MC_DIGEST")
IMAGES+=("$MC_REPO:v$MC_VERSION@$MC_DIGEST")

# --------------------------------------------------------------------------------------------- chart
log "chart: helm package with Metacontroller $MC_VERSION inside"
mkdir -p "$WORK/chart"
cp -r charts/trainop "$WORK/chart/trainop"
rm -f "$WORK/chart/trainop/charts/"*.tgz
mkdir -p "$WORK/chart/trainop/charts"
cp "$MC_CHART" "$WORK/chart/trainop/charts/"
# Its default values pull the images archived beside it, by digest, as trainop.yaml does.
"$PYTHON" hack/lib/release_files.py chart-values "$WORK/chart/trainop/values.yaml" \
  --image-tag "$VERSION@$APP_DIGEST" --tensorboard "$TB_REPO:$VERSION@$TB_DIGEST" \
  --metacontroller-tag "v$MC_VERSION@$MC_DIGEST" --init-image "$INIT_REPO:$VERSION@$INIT_DIGEST"
"$HELM" lint "$WORK/chart/trainop" >"$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log" >&2; exit 1; }
"$HELM" package "$WORK/chart/trainop" -d "$STAGE" >/dev/null

# --------------------------------------------------------------------------------------------- manifests
log "install manifest: kubectl kustomize manifests/ + Metacontroller, images by digest"
"$KUBECTL" kustomize manifests/ >"$WORK/kustomized.yaml"
# Metacontroller exactly as the chart configures its subchart (its values under `metacontroller:`).
"$PYTHON" -c 'import sys, yaml
values = yaml.safe_load(open(sys.argv[1]))["metacontroller"]
values.pop("enabled", None)
yaml.safe_dump(values, open(sys.argv[2], "w"))' charts/trainop/values.yaml "$WORK/mc-values.yaml"
"$HELM" template metacontroller "$MC_CHART" -n metacontroller --include-crds -f "$WORK/mc-values.yaml" \
  >"$WORK/metacontroller.yaml"
"$PYTHON" hack/lib/release_files.py manifest --kustomize "$WORK/kustomized.yaml" \
  --metacontroller "$WORK/metacontroller.yaml" "${PINS[@]}" "${TB_ARGS[@]}" --init-image "$INIT_REPO@$INIT_DIGEST" \
  --out "$STAGE/trainop.yaml" --crds-out "$STAGE/trainop-crds.yaml"

# --------------------------------------------------------------------------------------------- examples
log "examples: trainop examples show NAME"
# What `trainop examples show NAME` prints, for every NAME, in one process.
"$PYTHON" -c 'import sys
from pathlib import Path
from trainop.examples import example, names
for name in names():
    (Path(sys.argv[1]) / f"{name}.yaml").write_text(example(name).document)' "$STAGE/examples"

# The examples' images are built, not shipped (the torch one alone is 6 GB): their build context is.
# Byte-for-byte reproducible: sorted names, no owners, no times, gzip without a name or time stamp.
log "examples' images: training-images.tar.gz (build context)"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=__pycache__ \
  -C training-images -cf - . | gzip -n -9 >"$STAGE/training-images.tar.gz"

# --------------------------------------------------------------------------------------------- package
# Built from a copy of the tracked files (with the versions just written), so nothing untracked of this
# work tree and no build/ or egg-info left here can get in.
log "Python package: wheel and sdist (setuptools, no build isolation: offline)"
mkdir -p "$WORK/src"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$WORK/src"
# One process per build: setuptools keeps the sdist's output folder for a wheel built after it.
for build in build_sdist build_wheel; do
  (cd "$WORK/src" && "$PYTHON" -c 'import sys
from setuptools import build_meta
getattr(build_meta, sys.argv[1])(sys.argv[2])' "$build" "$STAGE") >"$WORK/package.log" 2>&1 \
    || { tail -n 40 "$WORK/package.log" >&2; exit 1; }
done
[ -f "$STAGE/trainop-$VERSION-py3-none-any.whl" ] && [ -f "$STAGE/trainop-$VERSION.tar.gz" ] \
  || { echo "the package build made $(ls "$STAGE")" >&2; exit 1; }

# --------------------------------------------------------------------------------------------- notes
previous="$(git describe --tags --abbrev=0 --match 'v[0-9]*' --exclude "v$VERSION" HEAD 2>/dev/null || true)"
{
  echo "# trainop $VERSION"
  echo
  if [ -f "docs/releases/$VERSION.md" ]; then cat "docs/releases/$VERSION.md"; echo; fi
  echo "## Images"
  echo
  echo "Pinned by digest in trainop.yaml and the chart's default values (trainop-init: the init containers"
  echo "of PyTorch workers and MPI launchers); each is in images/ as an OCI archive."
  echo
  for image in "${IMAGES[@]}"; do echo "- \`$image\`"; done
  echo
  if [ -n "$previous" ]; then echo "## Changes since $previous"; range="$previous..HEAD"
  else echo "## Changes (first release: every commit)"; range="HEAD"; fi
  echo
  git log --no-merges --format='- %s (%h)' "$range"
} >"$STAGE/RELEASE-NOTES.md"

(cd "$STAGE" && find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
if [ -z "$UNSIGNED" ]; then
  log "SHA256SUMS.sig: signed with $SIGNING_KEY, checked against its public key"
  bash hack/lib/release-signature.sh sign "$STAGE"
  echo "release@trainop namespaces=\"trainop-release\" $(ssh-keygen -y -f "$SIGNING_KEY")" >"$WORK/allowed_signers"
  bash hack/lib/release-signature.sh verify "$STAGE" "$WORK/allowed_signers"
fi
mv "$STAGE" "$OUT"

# --------------------------------------------------------------------------------------------- dist/
"$HELM" repo index "$DIST"
"$PYTHON" hack/lib/release_files.py page --dist "$DIST" ${BASE_URL:+--base-url "$BASE_URL"}
log "released $VERSION into $OUT in $(( $(date +%s) - started ))s ($(du -sh "$OUT" | cut -f1)); $(ls "$OUT" | wc -l) entries"
echo "$OUT"
