#!/usr/bin/env bash
# Builds Prometheus 3 (prometheus and promtool) from the Go module proxy for the telemetry tests and prints
# `export MUSTER_PROMETHEUS3_BIN=<dir>`. Debian ships only Prometheus 2, whose range selectors include their
# lower bound; Prometheus 3's exclude it, and the Prometheus source must get the same numbers from both.
# Cached outside the repo by version: the first build takes ~8 minutes on 2 cores, later runs none.
set -euo pipefail
# Prometheus v3.X.Y is tagged v0.3XX.Y as a Go module.
MODULE_VERSION=${MUSTER_PROMETHEUS3_MODULE:-v0.316.0}
CACHE=${MUSTER_PROMETHEUS3_CACHE:-$HOME/.cache/muster-prometheus}
command -v go >/dev/null || { echo "prometheus3: needs Go (https://go.dev/dl/)" >&2; exit 1; }
source_dir=$(cd /tmp && go mod download -json "github.com/prometheus/prometheus@$MODULE_VERSION" | jq -r .Dir)
version=$(cat "$source_dir/VERSION")
bin="$CACHE/v$version/bin"
if [[ ! -x $bin/prometheus || ! -x $bin/promtool ]]; then
  started=$(date +%s)
  echo "[prometheus3] building Prometheus $version ($MODULE_VERSION) into $bin" >&2
  # The version is set so /api/v1/status/buildinfo says 3.x, which is how Muster tells the range semantics apart.
  (cd /tmp && CGO_ENABLED=0 GOBIN="$bin" go install -trimpath \
    -ldflags "-X github.com/prometheus/common/version.Version=$version" \
    "github.com/prometheus/prometheus/cmd/prometheus@$MODULE_VERSION" \
    "github.com/prometheus/prometheus/cmd/promtool@$MODULE_VERSION")
  echo "[prometheus3] built in $(( $(date +%s) - started )) s" >&2
else
  echo "[prometheus3] Prometheus $version: cached in $bin" >&2
fi
echo "export MUSTER_PROMETHEUS3_BIN=$bin"
