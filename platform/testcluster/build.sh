#!/usr/bin/env bash
# Builds the test cluster's binaries from the Go module proxy into the cache (see lib.sh):
# kube-apiserver, kube-controller-manager and kube-scheduler from k8s.io/kubernetes (through
# the wrapper module build/), etcd from go.etcd.io/etcd/server/v3 (wrapper build/etcd/) and
# kwok from sigs.k8s.io/kwok. Idempotent: whatever is cached already is skipped.
# The first build takes a while (see README.md); `--force` rebuilds everything.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

force=0
[[ ${1:-} == --force ]] && force=1

require_go() {
  local minor
  command -v go >/dev/null || die "go is needed to build (Go 1.26 or newer)"
  minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
  ((${minor:-0} >= 26)) ||
    die "Go 1.26 or newer is needed (k8s.io/kubernetes $KUBERNETES_VERSION's go.mod says go 1.26.0), not $(go env GOVERSION)"
}

# build/go.mod and build/etcd/go.mod repeat the versions of versions.env: they must agree.
minor_patch=${KUBERNETES_VERSION#v1.}
grep -q "^[[:space:]]*k8s.io/kubernetes $KUBERNETES_VERSION\b" "$TESTCLUSTER_HOME/build/go.mod" ||
  die "build/go.mod does not require k8s.io/kubernetes $KUBERNETES_VERSION (versions.env)"
if grep -E '=> k8s.io/[a-z-]+ v' "$TESTCLUSTER_HOME/build/go.mod" | grep -vq " v0.$minor_patch\$"; then
  die "build/go.mod replaces a staging module with a version other than v0.$minor_patch"
fi
grep -q "^[[:space:]]*go.etcd.io/etcd/server/v3 $ETCD_VERSION\b" "$TESTCLUSTER_HOME/build/etcd/go.mod" ||
  die "build/etcd/go.mod does not require go.etcd.io/etcd/server/v3 $ETCD_VERSION (versions.env)"

export CGO_ENABLED=0
# nice: the build shares the machine with whatever else runs there.
GO=(nice -n 10 go)
started=$(date +%s)
built=()

have() { # have DIR NAME...: every binary is there and runs
  local dir=$1 name
  shift
  ((force)) && return 1
  for name in "$@"; do [[ -x $dir/$name ]] || return 1; done
}

install_into() { # install_into DIR FROM_DIR NAME...: move freshly built binaries into the cache
  local dir=$1 from=$2 name
  shift 2
  mkdir -p "$dir"
  for name in "$@"; do mv -f "$from/$name" "$dir/$name"; done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Kubernetes control plane.
kube_cmds=(kube-apiserver kube-controller-manager kube-scheduler)
if have "$KUBE_BIN" "${kube_cmds[@]}"; then
  log "kubernetes $KUBERNETES_VERSION: cached in $KUBE_BIN"
else
  require_go
  log "kubernetes $KUBERNETES_VERSION: building ${kube_cmds[*]} (the first build takes several minutes)"
  t0=$(date +%s)
  major=${KUBERNETES_VERSION#v}
  major=${major%%.*}
  minor=${minor_patch%%.*}
  # The release date of the module, so that the build is reproducible.
  build_date=$(cd "$TESTCLUSTER_HOME/build" &&
    go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  # The same variables hack/lib/version.sh sets, in both version packages.
  ldflags=(-s -w)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=(
      "-X=$pkg.gitVersion=$KUBERNETES_VERSION"
      "-X=$pkg.gitMajor=$major"
      "-X=$pkg.gitMinor=$minor"
      "-X=$pkg.gitTreeState=clean"
      "-X=$pkg.buildDate=$build_date"
    )
  done
  pkgs=()
  for c in "${kube_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$TESTCLUSTER_HOME/build" &&
    "${GO[@]}" build -trimpath -ldflags "${ldflags[*]}" -o "$tmp/" "${pkgs[@]}")
  install_into "$KUBE_BIN" "$tmp" "${kube_cmds[@]}"
  log "kubernetes $KUBERNETES_VERSION: built in $(($(date +%s) - t0)) s"
  built+=(kubernetes)
fi

# etcd.
if have "$ETCD_BIN" etcd; then
  log "etcd $ETCD_VERSION: cached in $ETCD_BIN"
else
  require_go
  log "etcd $ETCD_VERSION: building"
  t0=$(date +%s)
  (cd "$TESTCLUSTER_HOME/build/etcd" &&
    "${GO[@]}" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  install_into "$ETCD_BIN" "$tmp" etcd
  log "etcd $ETCD_VERSION: built in $(($(date +%s) - t0)) s"
  built+=(etcd)
fi

# KWOK: its go.mod has no replace directives, so `go install pkg@version` works as it is.
if have "$KWOK_BIN" kwok; then
  log "kwok $KWOK_VERSION: cached in $KWOK_BIN"
else
  require_go
  log "kwok $KWOK_VERSION: building"
  t0=$(date +%s)
  GOBIN="$tmp" GOFLAGS=-buildvcs=false "${GO[@]}" install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  install_into "$KWOK_BIN" "$tmp" kwok
  log "kwok $KWOK_VERSION: built in $(($(date +%s) - t0)) s"
  built+=(kwok)
fi

if ((${#built[@]})); then
  log "build took $(($(date +%s) - started)) s (${built[*]}); binaries cached under $CACHE_DIR"
else
  log "nothing to build: every binary is cached under $CACHE_DIR ($(($(date +%s) - started)) s)"
fi
