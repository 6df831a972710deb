# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Shared by build.sh, up.sh and down.sh: versions, where binaries are cached, where a running
# cluster keeps its state. Sourced, never run.

TESTCLUSTER_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=versions.env
. "$TESTCLUSTER_HOME/versions.env"

# Built binaries live outside the repository, one folder per component and version, so only
# the first build on a machine is slow.
CACHE_DIR=${MUSTER_TESTCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster-testcluster}
KUBE_BIN=$CACHE_DIR/kubernetes-$KUBERNETES_VERSION/bin
ETCD_BIN=$CACHE_DIR/etcd-$ETCD_VERSION/bin
KWOK_BIN=$CACHE_DIR/kwok-$KWOK_VERSION/bin

# A running cluster's certificates, kubeconfig, etcd data, logs and pids.
RUN_DIR=${MUSTER_TESTCLUSTER_DIR:-/tmp/muster-testcluster}

log() { printf '[testcluster] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
