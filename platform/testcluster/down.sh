#!/usr/bin/env bash
# Stops the local test cluster that up.sh started (each process by its recorded pid) and
# removes its run dir. Idempotent: with no cluster it does nothing.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

PIDS=$RUN_DIR/pids

if [[ ! -e $RUN_DIR ]]; then
  log "no test cluster in $RUN_DIR"
  exit 0
fi
[[ -f $RUN_DIR/.muster-testcluster ]] ||
  die "$RUN_DIR is not a test cluster's run dir (no .muster-testcluster): not touching it"

ours() { # ours PID NAME: the pid is alive and still runs that component (not a recycled pid)
  local exe state
  kill -0 "$1" 2>/dev/null || return 1
  read -r _ _ state _ <"/proc/$1/stat" 2>/dev/null || return 1
  [[ $state != Z ]] || return 1 # exited, not yet reaped by its parent
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 0
  [[ ${exe##*/} == "$2" || ${exe##*/} == "$2 (deleted)" ]]
}

# The reverse of the start order: the fake kubelets and controllers first, etcd last.
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  [[ -f $PIDS/$name.pid ]] || continue
  pid=$(<"$PIDS/$name.pid")
  if ours "$pid" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      ours "$pid" "$name" || break
      sleep 0.2
    done
    if ours "$pid" "$name"; then
      log "$name (pid $pid) did not stop in 10s: killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$PIDS/$name.pid"
done

rm -rf "$RUN_DIR"
log "removed $RUN_DIR"
