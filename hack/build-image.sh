#!/usr/bin/env bash
# Builds the project's image from the Dockerfile, unchanged, without a Docker engine or a registry:
#
#   hack/build-image.sh [--save PATH]
#   hack/build-image.sh --image tensorboard [--save PATH]   # tensorboard-image/Dockerfile instead, tagged
#                                                           # trainop-tensorboard:...; hack/build-tensorboard-image.sh
#
# Route (docs/build.md#image): Debian's podman/buildah/mmdebstrap/runc; a python:3.11-slim equivalent
# made from Debian bookworm packages with mmdebstrap (mirror = the host's own apt sources file, so no
# host name is written anywhere) and tagged docker.io/library/python:3.11-slim, the name an unqualified
# `FROM python:3.11-slim` resolves to; then `buildah bud --pull=never`.
#
# Prints the image reference on stdout (nothing else); progress and hints go to stderr. The image is
# tagged trainop:<pyproject version>, trainop:dev and trainop:src-<hash of the build inputs>, all under
# docker.io/library/ so that `image: trainop:<v>` in a pod resolves to it once imported into containerd.
# --save PATH writes a docker-archive of it with those three tags (for `ctr images import`, `docker load`).
# With --image tensorboard the same holds for trainop-tensorboard:<version>, :dev and :src-<hash>, built
# from tensorboard-image (its own context) on the same base image.
#
# Everything lives in ${TRAINOP_IMAGE_CACHE:-~/.cache/trainop-image}: podman storage, and our own
# containers.conf/storage.conf (runtime runc, ulimits within this sandbox's hard limits), selected through
# CONTAINERS_CONF / CONTAINERS_STORAGE_CONF so the machine's configuration is untouched. To use podman on
# the result by hand: `export CONTAINERS_CONF=$CACHE/containers.conf CONTAINERS_STORAGE_CONF=$CACHE/storage.conf`.
# To delete the cache: `umount $CACHE/storage/overlay` (podman's storage keeps a mount there), then rm -rf.
#
# Reuse: the base image is rebuilt only when its recipe changes (a label holds the recipe's hash); the
# app image only when the Dockerfile, .dockerignore, a file it copies, or the base image changed. Every
# step logs to $CACHE/logs/<step>.log and a failing step prints that log's tail. No output is piped into
# a reader that may stop early: under pipefail the writer's SIGPIPE would fail a step that succeeded.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
SAVE=""
IMAGE="trainop"
while [ $# -gt 0 ]; do
  case "$1" in
    --image) [ $# -ge 2 ] || { echo "--image needs a name" >&2; exit 2; }; IMAGE="$2"; shift 2 ;;
    --image=*) IMAGE="${1#--image=}"; shift ;;
    --save) [ $# -ge 2 ] || { echo "--save needs a path" >&2; exit 2; }; SAVE="$2"; shift 2 ;;
    --save=*) SAVE="${1#--save=}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

CACHE="${TRAINOP_IMAGE_CACHE:-$HOME/.cache/trainop-image}"
LOGS="$CACHE/logs"
BASE_REF="docker.io/library/python:3.11-slim"
# The image's repository and build context (where its Dockerfile and what it copies are).
case "$IMAGE" in
  trainop) APP_REPO="docker.io/library/trainop"; CONTEXT="$REPO" ;;
  tensorboard) APP_REPO="docker.io/library/trainop-tensorboard"; CONTEXT="$REPO/tensorboard-image" ;;
  *) echo "unknown --image $IMAGE: trainop or tensorboard" >&2; exit 2 ;;
esac
SUITE="bookworm"  # python3 is 3.11 in bookworm, as in python:3.11-slim
BASE_PACKAGES="python3,python3-pip,python3-venv,python-is-python3,ca-certificates,netbase,tzdata,passwd"
HOST_CA="/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$LOGS"

# Progress to stderr: stdout is the image reference.
LOG_FD=2
# shellcheck source=hack/lib/pieces.sh
. "$REPO/hack/lib/pieces.sh"
# One build at a time per cache: the e2e suite and a developer may call this concurrently.
take_lock "$CACHE/.lock"

# ---------------------------------------------------------------------------------------------------
install_tools() {
  apt-get -o DPkg::Lock::Timeout=600 update
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
    podman buildah mmdebstrap runc uidmap
}
missing=()
for tool in podman buildah mmdebstrap runc; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  # Rootful podman is what was measured here; apt-get needs root too.
  [ "$(id -u)" -eq 0 ] || { echo "missing ${missing[*]}; install them (as root) or run this as root" >&2; exit 1; }
  log "installing ${missing[*]} from Debian"
  step tools install_tools
fi

# ---------------------------------------------------------------------------------------------------
# Our own engine and storage settings (docs/build.md#image).
RUN_DIR="$CACHE/run"
mkdir -p "$CACHE/storage" "$RUN_DIR"
hard_nofile="$(ulimit -Hn)"
[ "$hard_nofile" = unlimited ] && hard_nofile=1048576
write_if_changed() { # path content: rewrite only on change, so running containers keep a stable file
  if [ "$(cat "$1" 2>/dev/null || true)" != "$2" ]; then printf '%s\n' "$2" >"$1.tmp" && mv "$1.tmp" "$1"; fi
}
write_if_changed "$CACHE/containers.conf" "# Written by hack/build-image.sh; used through CONTAINERS_CONF.
[containers]
# podman's defaults exceed this sandbox's hard limits (setrlimit RLIMIT_NOFILE: Operation not permitted).
default_ulimits = [\"nofile=$hard_nofile:$hard_nofile\", \"nproc=32768:32768\"]

[engine]
# crun fails on hosts with hybrid cgroups; runc works.
runtime = \"runc\"
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
events_logfile_path = \"$RUN_DIR/events.log\"
tmp_dir = \"$RUN_DIR/libpod\""
write_if_changed "$CACHE/storage.conf" "# Written by hack/build-image.sh; used through CONTAINERS_STORAGE_CONF.
[storage]
driver = \"overlay\"
graphroot = \"$CACHE/storage\"
runroot = \"$RUN_DIR/storage\""
export CONTAINERS_CONF="$CACHE/containers.conf" CONTAINERS_STORAGE_CONF="$CACHE/storage.conf"

label_of() { # image label: prints the label's value, or nothing when the image or label is absent
  podman image inspect --format "{{index .Labels \"$2\"}}" "$1" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------------
# Base image. The host's apt sources that name the suite are the mirror argument (mmdebstrap pastes a
# file argument into the chroot's sources); TRAINOP_APT_SOURCES overrides them (space-separated paths).
if [ -n "${TRAINOP_APT_SOURCES:-}" ]; then
  read -ra SOURCES <<<"$TRAINOP_APT_SOURCES"
else
  SOURCES=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    if [ -f "$f" ] && grep -qw "$SUITE" "$f"; then SOURCES+=("$f"); fi
  done
fi
[ "${#SOURCES[@]}" -gt 0 ] || { echo "no apt sources file names $SUITE; set TRAINOP_APT_SOURCES" >&2; exit 1; }

# The official image has no PEP 668 marker (pip installs into /usr/local). Apt's sources are dropped
# so the image holds no address of this machine's mirror; nothing in the Dockerfile uses apt.
# shellcheck disable=SC2016 # "$1" is the chroot path, expanded by mmdebstrap when it runs the hook.
CUSTOMIZE='rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*; rm -rf "$1"/var/lib/apt/lists/*'
BASE_ENV_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_RECIPE="$(printf '%s\n' "$SUITE" "$BASE_PACKAGES" "$CUSTOMIZE" "$BASE_ENV_PATH" slim-excludes-v1 | sha256sum)"
BASE_RECIPE="${BASE_RECIPE%% *}"

build_base() {
  local tar="$CACHE/base-rootfs.tar"
  rm -f "$tar"
  # Like debian:bookworm-slim: no docs, man pages or translations.
  mmdebstrap --variant=minbase --include="$BASE_PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="$CUSTOMIZE" \
    "$SUITE" "$tar" "${SOURCES[@]}"
  podman import \
    --change "ENV PATH=$BASE_ENV_PATH" --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    --change "LABEL org.trainop.base-recipe=$BASE_RECIPE" \
    "$tar" "$BASE_REF"
  rm -f "$tar"
  [ "$(label_of "$BASE_REF" org.trainop.base-recipe)" = "$BASE_RECIPE" ]
}
if [ "$(label_of "$BASE_REF" org.trainop.base-recipe)" = "$BASE_RECIPE" ]; then
  log "base image $BASE_REF cached"
else
  log "building base image $BASE_REF from Debian $SUITE packages (${SOURCES[*]})"
  step base build_base
fi
BASE_ID="$(podman image inspect --format '{{.Id}}' "$BASE_REF")"

# ---------------------------------------------------------------------------------------------------
# App image. Its inputs: the Dockerfile, .dockerignore (where the context has one), what the Dockerfile
# COPYs (minus what .dockerignore drops: caches and egg-info), and the base image.
cd "$CONTEXT"
IGNORE=()
[ -f .dockerignore ] && IGNORE=(.dockerignore)
COPIED=()
while read -ra words; do
  [ "${#words[@]}" -ge 2 ] || { echo "Dockerfile: COPY without a destination" >&2; exit 1; }
  case "${words[0]}" in --*) echo "Dockerfile: COPY flags (${words[0]}) are not hashed here" >&2; exit 1 ;; esac
  COPIED+=("${words[@]:0:${#words[@]}-1}")
done < <(sed -n 's/^COPY[[:space:]]\{1,\}//p' Dockerfile)
[ "${#COPIED[@]}" -gt 0 ] || { echo "Dockerfile copies nothing?" >&2; exit 1; }
INPUTS_HASH="$( {
    echo "base $BASE_ID"
    find Dockerfile "${IGNORE[@]}" "${COPIED[@]}" -type f \
      ! -path '*/__pycache__/*' ! -name '*.pyc' ! -path '*.egg-info/*' -print0 \
      | sort -z | xargs -0 sha256sum
  } | sha256sum)"
INPUTS_HASH="${INPUTS_HASH:0:16}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO/pyproject.toml")"
[ -n "$VERSION" ] || { echo "no version in pyproject.toml" >&2; exit 1; }
REF="$APP_REPO:src-$INPUTS_HASH"

build_app() {
  # The host's CA bundle (this machine's egress TLS) is mounted for RUN steps only; not in the image.
  buildah bud --pull=never --isolation chroot \
    -v "$HOST_CA:/etc/ssl/certs/ca-certificates.crt:ro" \
    --label "org.trainop.inputs=$INPUTS_HASH" \
    -f Dockerfile -t "$REF" .
}
if podman image exists "$REF"; then
  log "app image $REF cached (inputs unchanged)"
else
  log "building $REF from the Dockerfile"
  step app build_app
fi
tag_app() { podman tag "$REF" "$APP_REPO:$VERSION" "$APP_REPO:dev"; }
step tag tag_app

# Older builds of the app would pile up in the cache. Only those built over an hour ago go: a test that
# got a reference a moment ago must still find it; one used by a container stays too (rmi refuses).
prune_app() {
  local tags tag
  tags="$(podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$APP_REPO" --filter until=60m)"
  for tag in $tags; do
    case "$tag" in
      "$REF") ;;
      "$APP_REPO:src-"*) podman rmi "$tag" || echo "kept $tag (in use)" ;;
    esac
  done
  podman image prune --force
}
step prune prune_app

if [ -n "$SAVE" ]; then
  save_app() {
    mkdir -p "$(dirname "$SAVE")"
    rm -f "$SAVE.tmp"
    # -m: one image entry carrying all three tags.
    podman save -m --format docker-archive -o "$SAVE.tmp" "$APP_REPO:$VERSION" "$APP_REPO:dev" "$REF"
    mv "$SAVE.tmp" "$SAVE"
  }
  step save save_app
  log "saved $REF to $SAVE (docker-archive)"
fi
log "image $REF (also $APP_REPO:$VERSION, $APP_REPO:dev); podman: export CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF"
echo "$REF"
