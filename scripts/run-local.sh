#!/usr/bin/env bash
# Starts Muster on one machine: web (gunicorn), a Celery worker (and one for what-if replays) and Celery beat, with the
# embedded defaults unless the environment says otherwise. Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
BIN="$VENV/bin"
# A shell started with SIGINT ignored (`make run &` in a script or a CI job: a shell without job control ignores it in
# what it starts in the background) cannot trap it, while the web server and Celery below set their own handlers and
# stop on it. A Ctrl-C to the process group (`kill -INT -- -PGID`, as a terminal sends) then stopped them unheard by
# this script, which read Celery beat's exit as a crash ("exited (status 0); stopping the rest", make's "Error 1").
# Started again with SIGINT's default, it hears the same Ctrl-C as its processes (bash cannot undo an ignore itself).
if [[ $(trap -p INT) == "trap -- '' SIGINT" && -z ${MUSTER_RUN_SIGINT_DEFAULT:-} ]]; then
  export MUSTER_RUN_SIGINT_DEFAULT=1 # once: should the reset not take, it goes on as before rather than loop
  exec "$BIN/python" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp("bash", ["bash", *sys.argv[1:]])' \
    "$PWD/scripts/run-local.sh" "$@"
fi
PORT=${PORT:-8000}
HOST=${HOST:-127.0.0.1}
export MUSTER_DATA_DIR=${MUSTER_DATA_DIR:-$PWD/var}
# The address this run serves, for the job links in e-mails and webhooks (a bare path is no link in a mail reader).
export MUSTER_BASE_URL=${MUSTER_BASE_URL:-http://$HOST:$PORT}
mkdir -p "$MUSTER_DATA_DIR"

# Before anything starts, the port must be free: another program listening on it would answer the readiness check
# below for gunicorn (which then fails "Connection in use"), and the banner would send the user to that program.
# Bound as gunicorn binds it (SO_REUSEADDR: a port a stopped Muster left in TIME_WAIT is free).
"$BIN/python" - "$HOST" "$PORT" <<'PY' || exit 1
import errno, socket, sys

host, port = sys.argv[1], sys.argv[2]


def bind(number: int) -> OSError | None:
    try:
        family = socket.getaddrinfo(host, number, type=socket.SOCK_STREAM)[0][0]
        socket.create_server((host, number), family=family).close()
    except OSError as exc:
        return exc
    return None


if not port.isdigit() or not 0 < int(port) < 65536:
    sys.exit(f"make run: PORT={port} is not a port number; Muster did not start.")
if (error := bind(int(port))) is not None:
    other = next((n for n in range(int(port) + 1, min(int(port) + 50, 65536)) if bind(n) is None), None)
    choose = f"PORT={other} make run" if other else "PORT=... make run"
    if error.errno == errno.EADDRINUSE:
        sys.exit(f"make run: port {port} on {host} is in use by another program; Muster did not start. Choose another port: {choose}")
    sys.exit(f"make run: cannot listen on {host}:{port} ({error.strerror or error}); Muster did not start. Try another port: {choose}")
PY

"$BIN/python" manage.py migrate --noinput -v 0
"$BIN/python" manage.py muster_bootstrap
# Fingerprinted, gzipped static files under $MUSTER_DATA_DIR/static: a page's scripts are cached for a year.
"$BIN/python" manage.py collectstatic --noinput -v 0

pids=()
web=""
declare -A names=() stop_signals=()
# started PID NAME [SIGNAL]: SIGNAL (default TERM) is what stops it.
started() { pids+=("$1"); names[$1]=$2; stop_signals[$1]=${3:-TERM}; }
# alone COMMAND...: runs it in a process group of its own, out of the terminal's reach. A Ctrl-C (SIGINT to the
# terminal's process group) then reaches this script only, and each process hears one stop, the one `stop` sends it:
# Celery took the terminal's SIGINT and then the script's signal as two Ctrl-Cs, printed "Hitting Ctrl+C again will
# terminate all running tasks!" and, at a third, a WorkerTerminate traceback. Only as `alone ... &`: the exec makes
# the background job's own process (its $!) the command, not a subshell running it.
# (Python ignores SIGPIPE and SIGXFSZ, which the command would inherit: put back as they were.)
alone() {
  exec "$BIN/python" -c 'import os, signal, sys
os.setpgid(0, 0)
for sig in (signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(sig, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}
# catches PID SIGNAL: whether PID has its handler for SIGNAL set (Linux's /proc says; elsewhere it is never sure).
# ignores PID SIGNAL: whether it ignores SIGNAL (elsewhere than Linux: assumed so).
catches() { _sigmask "$1" "$2" SigCgt 1; }
ignores() { _sigmask "$1" "$2" SigIgn 0; }
_sigmask() {
  local mask
  mask=$(awk -v field="$3:" '$1 == field { print $2 }' "/proc/$1/status" 2>/dev/null) || mask=""
  [[ -n $mask ]] || return "$4"
  (((16#$mask >> ($(kill -l "$2") - 1)) & 1))
}
# ask PID SIGNAL: sends it, and remembers PID as having heard it if PID caught it. One that did not may have dropped
# it (ignored while it started), and is asked again.
declare -A heard=()
ask() {
  if catches "$1" "$2"; then heard[$1]=1; fi
  kill "-$2" "$1" 2>/dev/null || true
}
# How long the processes have to stop before they are killed (SIGKILL), naming each.
STOP_SECONDS=${MUSTER_STOP_SECONDS:-20}
stop() {
  trap - EXIT
  # A second Ctrl-C while it stops would end this script alone, and leave the processes (in groups of their own)
  # running: the stop goes on, bounded by STOP_SECONDS.
  trap '' INT TERM HUP
  { echo; echo "stopping Muster..."; } 2>/dev/null || true # a closed terminal (HUP) takes no more words
  # Bash reports each child a signal stopped ("line 71: 32471 Quit  celery ... worker") as it reaps it: the stop
  # asked for that, so its own stderr is quiet meanwhile; what the stop has to say goes to the real one (fd 3).
  exec 3>&2 2>/dev/null
  local pid
  local -a left=()
  for pid in "${pids[@]}"; do ask "$pid" "${stop_signals[$pid]}"; done
  for i in $(seq $((STOP_SECONDS * 5))); do
    left=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && left+=("$pid"); done
    ((${#left[@]})) || break
    # Again every 2 s to a process that may not have heard it: one still starting drops it (Celery before it sets its
    # handlers, with SIGQUIT ignored when `make run` was started so), and a Ctrl-C right after the banner waited out
    # STOP_SECONDS and a kill. Never to one that heard it: a worker in the middle of its shutdown takes a second
    # SIGQUIT as "now, by force" and a third raised WorkerTerminate, a traceback on the terminal. The web server's
    # workers too, gunicorn's SIGQUIT, if they ignore it (a worker still starting, with it ignored: gunicorn then
    # waited on it 30 s); not one that is exiting, its handlers already gone ("Worker was sent SIGQUIT!").
    if ((i % 10 == 0)); then
      for pid in "${left[@]}"; do [[ -n ${heard[$pid]:-} ]] || ask "$pid" "${stop_signals[$pid]}"; done
      if [[ -n $web ]]; then
        for pid in $(pgrep -P "$web" 2>/dev/null); do ! ignores "$pid" QUIT || ask "$pid" QUIT; done
      fi
    fi
    sleep 0.2
  done
  for pid in "${left[@]}"; do
    echo "${names[$pid]} did not stop within ${STOP_SECONDS} s; killing it" >&3
    pkill -KILL -P "$pid" 2>/dev/null || true # its own children first (a Celery worker's pool), or they outlive it
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait "${pids[@]}" 2>/dev/null || true
  exec 2>&3 3>&-
}
trap 'stop; exit 130' INT TERM
# The terminal closed: its SIGHUP reaches this script alone now (the processes are in groups of their own).
trap 'stop; exit 129' HUP
trap stop EXIT

# It touches the ready file once it holds the port (config/gunicorn_ready.py): the banner below waits for that.
export MUSTER_GUNICORN_READY_FILE="$MUSTER_DATA_DIR/gunicorn.ready"
rm -f "$MUSTER_GUNICORN_READY_FILE"
alone "$BIN/gunicorn" config.wsgi -c config/gunicorn_ready.py --bind "$HOST:$PORT" --workers 2 --threads 8 --access-logfile - --log-level warning &
# Stopped with SIGQUIT, gunicorn's quick shutdown: a SIGTERM it read before the Ctrl-C's SIGINT made it a graceful one,
# which waited on its workers up to its 30 s graceful timeout, past STOP_SECONDS ("did not stop within 20 s").
web=$!
started "$web" "the web server (gunicorn)" QUIT
alone "$BIN/celery" -A config --quiet worker --loglevel WARNING --concurrency 1 --hostname "muster@%h" --without-gossip --without-mingle --without-heartbeat >/dev/null &
started $! "the Celery worker"
# What-if replays (/whatif/) on their own queue and worker, so a long replay never holds up the scheduling cycle.
# Stopped with SIGQUIT, Celery's cold shutdown: SIGTERM, like the terminal's Ctrl-C, is a warm one, which waits for a
# running replay to end (up to its 6-hour limit). The replay is cut off, and its run marked failed as stopped with its
# worker (whatif/tasks.py), not left "running".
alone "$BIN/celery" -A config --quiet worker -Q "${CELERY_TASK_DEFAULT_QUEUE:-muster}-whatif" --loglevel WARNING --concurrency 1 --hostname "whatif@%h" --without-gossip --without-mingle --without-heartbeat >/dev/null &
started $! "the what-if worker" QUIT
alone "$BIN/celery" -A config --quiet beat --loglevel WARNING --schedule "$MUSTER_DATA_DIR/celerybeat-schedule" >/dev/null &
started $! "Celery beat"
if [[ ${MUSTER_CLUSTER:-simulated} == kubernetes ]]; then
  # Pod and node events trigger a cycle at once instead of waiting for beat's next tick.
  alone "$BIN/python" manage.py muster_watch &
  started $! "the cluster watcher (muster_watch)"
fi

# The banner only once our own web server holds the port (another program that took it since the check above would
# answer the request below) and answers: a command typed straight after it must reach it.
for _ in $(seq 120); do
  [[ -e $MUSTER_GUNICORN_READY_FILE ]] &&
    "$BIN/python" -c "import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)" "http://$HOST:$PORT/accounts/login/" 2>/dev/null && break
  if ! kill -0 "${pids[0]}" 2>/dev/null; then
    [[ -e $MUSTER_GUNICORN_READY_FILE ]] || echo "make run: the web server could not listen on $HOST:$PORT (another program took it since Muster checked it was free?); choose another port: PORT=... make run" >&2
    echo "the web server did not start" >&2
    exit 1
  fi
  sleep 0.5
done
# Say where the data goes: with DATABASE_URL / REDIS_URL in the environment (a shell set up for `make test`, say) this is
# PostgreSQL and Redis, not the SQLite file and spool under var/ (the password is not printed).
database="SQLite in $MUSTER_DATA_DIR"
[[ -n ${DATABASE_URL:-} ]] && database=$(sed -E 's#//([^:/@]*):[^@]*@#//\1:***@#' <<<"$DATABASE_URL")
broker="embedded (a spool in $MUSTER_DATA_DIR)"
[[ -n ${CELERY_BROKER_URL:-${REDIS_URL:-}} ]] && broker=$(sed -E 's#//([^:/@]*):[^@]*@#//\1:***@#' <<<"${CELERY_BROKER_URL:-$REDIS_URL}")
cat <<MSG

  Muster is running at http://$HOST:$PORT/
  API docs: http://$HOST:$PORT/api/docs/   Django admin: http://$HOST:$PORT/admin/
  Cluster: ${MUSTER_CLUSTER:-simulated}   Data: $MUSTER_DATA_DIR
  Database: $database   Broker: $broker
  Logins are above (also in $MUSTER_DATA_DIR/local-logins.txt). Ctrl-C stops everything.

MSG
# Exit (and stop the others) as soon as any one of them dies, saying which (under `set -e` a failed `wait` left
# the user with a traceback and "stopping Muster..." only).
status=0
wait -n -p died "${pids[@]}" || status=$?
# A signal to this script and to a process at once (someone's `kill` of the session) may end that process before this
# script runs its trap: a moment's grace lets the trap stop everything quietly (exit 130) instead of this calling it
# a death. The grace's sleep is in this script's process group, so a Ctrl-C ends it at once.
sleep 0.5 || true
echo "${names[${died:-}]:-a Muster process} exited (status $status); stopping the rest" >&2
exit 1
