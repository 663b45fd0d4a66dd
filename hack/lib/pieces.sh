# shellcheck shell=bash
# Sourced by the build scripts: their lock, their stamps and their logged steps.
#
# The caller sets CACHE (each step logs to $CACHE/logs/<name>.log) and, for the stamps, BIN (a stamp is
# $BIN/.stamp-<piece>) or STAMP_PREFIX (a stamp is $STAMP_PREFIX<piece>). LOG_FD=2 sends progress to
# stderr, for a script whose stdout is its result.
#
# A piece is reused only when its stamp names the wanted version: the stamp is cleared before a rebuild
# and written only after the built thing has proven itself, so a half-finished build is never mistaken
# for a good one. A failed step prints its log's tail. No output is piped into a reader that may stop
# early (`| head`): under pipefail the writer's SIGPIPE would fail a step that succeeded.
# The functions below are used by the sourcing scripts.
# shellcheck disable=SC2034

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Installs those of the Debian packages named that are not installed yet; says so when none is missing.
install_missing_debs() { # package...
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ "${#missing[@]}" -eq 0 ]; then log "Debian packages present: $*"; return 0; fi
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&"${LOG_FD:-1}"; }

# take_lock FILE: one run at a time per lock file (a developer and a test may call a script concurrently).
# Fails with a message naming the folder when its filesystem has less than GIB GiB free: a build that
# runs out of space midway fails far from the cause ("no space left on device" in a commit step).
require_free_gib() { # GiB folder...
  local want="$1" dir free
  shift
  for dir in "$@"; do
    mkdir -p "$dir"
    free=$(( $(df -Pk "$dir" | awk 'NR == 2 { print $4 }') / 1048576 ))
    if [ "$free" -lt "$want" ]; then
      echo "only ${free} GiB free on the filesystem of $dir; this step needs ${want} GiB: free some space" \
        "(or point TRAINOP_E2E_CACHE / TRAINOP_IMAGE_CACHE / TMPDIR at a larger disk) and run it again" >&2
      return 1
    fi
  done
}
take_lock() {
  exec 9>"$1"
  if ! flock -n 9; then
    log "another build holds $1; waiting"
    flock 9
  fi
}

_stamp() { printf '%s' "${STAMP_PREFIX:-$BIN/.stamp-}$1"; }
stamp_of() { cat "$(_stamp "$1")" 2>/dev/null || true; } # piece: its stamp, or nothing
stamp_is() { [ "$(stamp_of "$1")" = "$2" ]; } # piece version
write_stamp() { local f; f="$(_stamp "$1")"; printf '%s\n' "$2" >"$f.tmp" && mv "$f.tmp" "$f"; }
# Called before a piece rebuilds: a build that dies half-way must not leave an old stamp behind.
clear_stamp() { rm -f "$(_stamp "$1")"; }
# stamp_ok PIECE VERSION BINARY...: the stamp names VERSION and each $BIN/BINARY is a non-empty executable.
stamp_ok() {
  local piece="$1" version="$2" b; shift 2
  stamp_is "$piece" "$version" || return 1
  for b in "$@"; do [ -x "$BIN/$b" ] && [ -s "$BIN/$b" ] || return 1; done
}

# logged NAME COMMAND...: runs COMMAND with its output in $CACHE/logs/NAME.log and sets RC (its status)
# and ELAPSED (seconds); on failure the log's tail goes to stderr. COMMAND runs in a subshell with
# errexit of its own, so `cd` stays local and its first failing command stops it. Call `logged` as a
# statement of its own, never as a condition (`if`, `&&`, `||`): there bash ignores errexit even in that
# subshell, and a failed command would go unnoticed.
logged() {
  local name="$1" t0 log_file="$CACHE/logs/$1.log"; shift
  mkdir -p "$CACHE/logs"
  t0="$(date +%s)"
  set +e
  ( set -euo pipefail; "$@" ) >"$log_file" 2>&1
  RC=$?
  set -e
  ELAPSED="$(($(date +%s) - t0))"
  if [ "$RC" -ne 0 ]; then
    log "=== $name: FAILED rc=$RC (${ELAPSED}s); last lines of $log_file:"
    tail -n 40 "$log_file" >&2
  fi
}

# step NAME COMMAND...: `logged`, and the script exits when COMMAND fails.
step() {
  logged "$@"
  [ "$RC" -eq 0 ] || exit "$RC"
  log "=== $1: ok (${ELAPSED}s)"
}

declare -a SUMMARY=()
FAILED=0
T_START="$(date +%s)"
# run_piece NAME FUNCTION: one of a list of pieces; a failed one is counted and does not stop the others.
run_piece() {
  log "=== $1: start (log: $CACHE/logs/$1.log)"
  logged "$1" "$2"
  if [ "$RC" -eq 0 ]; then
    log "=== $1: ok (${ELAPSED}s)"
    SUMMARY+=("$(printf '%-20s %6ss  ok' "$1" "$ELAPSED")")
  else
    SUMMARY+=("$(printf '%-20s %6ss  FAILED rc=%s' "$1" "$ELAPSED" "$RC")")
    FAILED=1
  fi
}

print_summary() { # title
  echo "---------------- $1 (wall time) ----------------"
  printf '%s\n' "${SUMMARY[@]}"
  printf '%-20s %6ss\n' total "$(($(date +%s) - T_START))"
}

# fetch_source DEST SNAPSHOT MARKER URL TAG: DEST becomes a writable copy of the unmodified source
# snapshot SNAPSHOT when it has the folder MARKER (a snapshot may be read-only, and `go build -mod=mod`
# writes go.sum), else a shallow clone of TAG from URL.
fetch_source() {
  local dest="$1" snapshot="$2" marker="$3" url="$4" tag="$5"
  rm -rf "$dest"
  if [ -d "$snapshot/$marker" ]; then
    log "source: $snapshot"
    cp -r "$snapshot" "$dest"
    chmod -R u+w "$dest"
  else
    log "source: git clone of tag $tag"
    git clone --quiet --depth 1 --branch "$tag" "$url" "$dest"
  fi
}
