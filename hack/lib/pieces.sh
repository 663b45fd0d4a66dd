# shellcheck shell=bash
# Sourced by the build scripts whose work is a list of cached pieces (build-control-plane.sh,
# build-node.sh). The caller sets CACHE and BIN. A piece is reused only when its stamp names the wanted
# version: the stamp is cleared before a rebuild and written only after the built thing has proven
# itself, so a half-finished build is never mistaken for a good one. Each piece logs to
# $CACHE/logs/<piece>.log; a failed one prints that log's tail and makes the script exit non-zero.
# No output is piped into a reader that may stop early (`| head`): under pipefail the writer's SIGPIPE
# would fail a piece that succeeded.
# The functions below are used by the sourcing scripts.
# shellcheck disable=SC2034

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# take_lock FILE: one run at a time per lock file (a developer and a test may call a script concurrently).
take_lock() {
  exec 9>"$1"
  if ! flock -n 9; then
    log "another build holds $1; waiting"
    flock 9
  fi
}

stamp_is() { [ "$(cat "$BIN/.stamp-$1" 2>/dev/null || true)" = "$2" ]; } # piece version
write_stamp() { printf '%s\n' "$2" >"$BIN/.stamp-$1.tmp" && mv "$BIN/.stamp-$1.tmp" "$BIN/.stamp-$1"; }
# Called before a piece rebuilds: a build that dies half-way must not leave an old stamp behind.
clear_stamp() { rm -f "$BIN/.stamp-$1"; }

declare -a SUMMARY=()
FAILED=0
T_START="$(date +%s)"
run_piece() { # name function
  local name="$1" fn="$2" t0 t1 rc log_file="$CACHE/logs/$1.log"
  mkdir -p "$CACHE/logs"
  log "=== $name: start (log: $log_file)"
  t0="$(date +%s)"
  # Subshell: `cd` and errexit stay local, and one failing piece does not stop the others.
  set +e
  ( set -euo pipefail; "$fn" ) >"$log_file" 2>&1
  rc=$?
  set -e
  t1="$(date +%s)"
  if [ "$rc" -eq 0 ]; then
    log "=== $name: ok ($((t1 - t0))s)"
    SUMMARY+=("$(printf '%-20s %6ss  ok' "$name" "$((t1 - t0))")")
  else
    log "=== $name: FAILED rc=$rc ($((t1 - t0))s); last lines of $log_file:"
    tail -n 40 "$log_file" >&2
    SUMMARY+=("$(printf '%-20s %6ss  FAILED rc=%s' "$name" "$((t1 - t0))" "$rc")")
    FAILED=1
  fi
}

print_summary() { # title
  echo "---------------- $1 (wall time) ----------------"
  printf '%s\n' "${SUMMARY[@]}"
  printf '%-20s %6ss\n' total "$(($(date +%s) - T_START))"
}
