#!/usr/bin/env bash
# push and build_framework are called indirectly through step and logged.
# shellcheck disable=SC2317,SC2329
# Builds the examples' generic images from training-images/Dockerfile, unchanged (one per framework
# folder, as its header says: `docker build --build-arg FRAMEWORK=<folder> -t
# trainop-examples/<folder>:latest training-images/`), and the project's image (hack/build-image.sh), into
# the OCI layout the real-node tier's registry serves:
#   ${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}/images/oci
# as trainop-examples/<folder>:latest and library/trainop:<tag> (so `image: trainop-examples/pytorch:latest`
# in a pod resolves to docker.io/trainop-examples/pytorch:latest, which containerd pulls from there).
# The images hold no script: each example of trainop/examples/ mounts its own from a ConfigMap.
#
# The FROM python:3.11-slim and buildah setup are hack/build-image.sh's (a Debian-made equivalent in its
# own podman storage); the RUN steps get the host's CA bundle (pip) and apt sources (the mpi example's
# apt-get) bind-mounted, so neither ends up in an image. An image is rebuilt only when the Dockerfile,
# its framework folder or the base image changed (a stamp per image holds the inputs' hash). The
# TensorBoard image (hack/build-tensorboard-image.sh) goes in too, as library/trainop-tensorboard:<version>,
# the chart's default `tensorboard.image`, and :src-<hash>. Layers are
# pushed zstd-compressed (level 1): ~20x faster than buildah's default gzip on the 6 GB torch image.
#
#   hack/build-training-images.sh [framework...]    # default: every folder of training-images/
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${TRAINOP_E2E_CACHE:-$HOME/.cache/trainop-e2e}"
LAYOUT="$CACHE/images/oci"
STAMPS="$CACHE/images/stamps"
LOGS="$CACHE/logs"
# A stamp per framework image and one for the project's image: the inputs' hash or the image reference they hold.
STAMP_PREFIX="$STAMPS/"
IMAGE_CACHE="${TRAINOP_IMAGE_CACHE:-$HOME/.cache/trainop-image}"
HOST_CA="/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$LAYOUT" "$STAMPS" "$LOGS"
# shellcheck source=hack/lib/pieces.sh
. "$REPO/hack/lib/pieces.sh"
take_lock "$CACHE/.training-images.lock"

CONTEXT="$REPO/training-images"
frameworks=("$@")
if [ "${#frameworks[@]}" -eq 0 ]; then
  for d in "$CONTEXT"/*/; do
    [ -f "${d}requirements.txt" ] && frameworks+=("$(basename "$d")")
  done
fi

# The project's image, and with it the base image the examples' images start FROM.
log "project image: hack/build-image.sh (log: $LOGS/build-image.log)"
if ! APP_REF="$(bash "$REPO/hack/build-image.sh" 2>"$LOGS/build-image.log")"; then
  tail -n 40 "$LOGS/build-image.log" >&2
  exit 1
fi
export CONTAINERS_CONF="$IMAGE_CACHE/containers.conf" CONTAINERS_STORAGE_CONF="$IMAGE_CACHE/storage.conf"
BASE_ID="$(podman image inspect --format '{{.Id}}' docker.io/library/python:3.11-slim)"

# Apt sources for the mpi image's `apt-get install openmpi-bin`: the base image has none.
APT_MOUNTS=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && APT_MOUNTS+=(-v "$f:$f:ro")
done

push() { # local-image layout-ref
  # index.json is rewritten by each writer; hack/lib/oci_layout.py holds the same lock.
  flock "$LAYOUT.lock" buildah push --compression-format zstd --compression-level 1 "$1" "oci:$LAYOUT:$2"
}
in_layout() { "${PYTHON:-python3}" "$REPO/hack/lib/oci_layout.py" has --layout "$LAYOUT" "$1"; }

# ---------------------------------------------------------------------------------------------
APP_TAG="${APP_REF##*:}"
if stamp_is trainop "$APP_REF" && in_layout "library/trainop:$APP_TAG"; then
  log "library/trainop:$APP_TAG in the layout"
else
  step push-trainop push "$APP_REF" "library/trainop:$APP_TAG"
  write_stamp trainop "$APP_REF"
  log "library/trainop:$APP_TAG pushed to the layout"
  # Every source change makes a new project image; the layout keeps only the current one.
  "${PYTHON:-python3}" "$REPO/hack/lib/oci_layout.py" prune --layout "$LAYOUT" \
    --drop-prefix "library/trainop:src-" --keep "library/trainop:$APP_TAG"
fi

# The TensorBoard image, under the tag the hooks' default TRAINOP_TENSORBOARD_IMAGE names.
log "TensorBoard image: hack/build-tensorboard-image.sh (log: $LOGS/build-tensorboard-image.log)"
if ! TB_REF="$(bash "$REPO/hack/build-tensorboard-image.sh" 2>"$LOGS/build-tensorboard-image.log")"; then
  tail -n 40 "$LOGS/build-tensorboard-image.log" >&2
  exit 1
fi
TB_VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml")"
TB_TAG="${TB_REF##*:}"
if stamp_is trainop-tensorboard "$TB_REF" && in_layout "library/trainop-tensorboard:$TB_VERSION"; then
  log "library/trainop-tensorboard:$TB_VERSION in the layout"
else
  step push-tensorboard push "$TB_REF" "library/trainop-tensorboard:$TB_TAG"
  step push-tensorboard-version push "$TB_REF" "library/trainop-tensorboard:$TB_VERSION"
  write_stamp trainop-tensorboard "$TB_REF"
  log "library/trainop-tensorboard:$TB_VERSION ($TB_TAG) pushed to the layout"
  "${PYTHON:-python3}" "$REPO/hack/lib/oci_layout.py" prune --layout "$LAYOUT" \
    --drop-prefix "library/trainop-tensorboard:src-" --keep "library/trainop-tensorboard:$TB_TAG"
fi

build_framework() { # framework inputs-hash image-ref
  cd "$CONTEXT"
  buildah bud --pull=never --isolation chroot -v "$HOST_CA:$HOST_CA:ro" "${APT_MOUNTS[@]}" \
    --build-arg "FRAMEWORK=$1" --label "org.trainop.inputs=$2" -f Dockerfile -t "$3" .
  push "$3" "trainop-examples/$1:latest"
}

for ex in "${frameworks[@]}"; do
  [ -f "$CONTEXT/$ex/requirements.txt" ] || { echo "no training-images/$ex/requirements.txt" >&2; exit 2; }
  hash="$( { echo "base $BASE_ID"; cd "$CONTEXT" && find Dockerfile "$ex" -type f ! -path '*/__pycache__/*' \
             -print0 | sort -z | xargs -0 sha256sum; } | sha256sum)"
  hash="${hash:0:16}"
  ref="docker.io/trainop-examples/$ex:latest"
  if stamp_is "$ex" "$hash" && podman image exists "$ref" \
     && in_layout "trainop-examples/$ex:latest"; then
    log "$ref cached (inputs $hash)"
    continue
  fi
  # The torch image is 6 GB: pip's downloads, the committed layers and the pushed copy all need room.
  require_free_gib 16 "$IMAGE_CACHE" "${TMPDIR:-/var/tmp}" "$LAYOUT" || { FAILED=1; continue; }
  log "building $ref (log: $LOGS/image-$ex.log)"
  logged "image-$ex" build_framework "$ex" "$hash" "$ref"
  if [ "$RC" -eq 0 ]; then
    write_stamp "$ex" "$hash"
    log "$ref built and pushed (${ELAPSED}s, $(podman image inspect --format '{{.Size}}' "$ref") bytes)"
  else
    FAILED=1
  fi
done
# Layers of replaced images stay in podman's storage and the layout otherwise.
podman image prune --force >/dev/null
"${PYTHON:-python3}" "$REPO/hack/lib/oci_layout.py" prune --layout "$LAYOUT" \
  --drop-prefix "library/trainop:src-" --keep "library/trainop:$APP_TAG"
exit "$FAILED"
