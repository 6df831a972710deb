#!/usr/bin/env bash
# Installs (from Debian's packages) and starts the real parts the test suite runs against:
# PostgreSQL, Redis, Chromium and Prometheus (the Kubernetes test cluster is `make testcluster-up`). Idempotent; needs root for
# the install step.
# Prints the environment to use, e.g.: eval "$(scripts/test-services.sh)"
set -euo pipefail

need=()
command -v pg_ctlcluster >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
# Prometheus and promtool for the Prometheus telemetry source's tests: they load recorded data into TSDB blocks and start
# their own server on a free loopback port (tests/e2e/prometheus/recorded.py), never the package's service (prometheus.service
# on :9090), which the init system may or may not start; nothing here depends on it.
command -v promtool >/dev/null && command -v prometheus >/dev/null || need+=(prometheus)
# The Kubernetes test cluster's scripts (platform/testcluster) and kubectl for the tests that compare with it.
for tool in jq curl openssl; do command -v "$tool" >/dev/null || need+=("$tool"); done
command -v kubectl >/dev/null || need+=(kubernetes-client)
if ((${#need[@]})); then
  echo "installing ${need[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# PostgreSQL: the distribution's cluster, a muster role that may create the test databases.
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q .; then
  pg_createcluster "$version" main >&2
fi
cluster=$(pg_lsclusters -h | head -1)
read -r pg_version pg_name pg_port pg_status _ <<<"$cluster"
if [[ $pg_status != online* ]]; then
  pg_ctlcluster "$pg_version" "$pg_name" start >&2
fi
su postgres -c "psql -p $pg_port -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='muster'\"" | grep -q 1 \
  || su postgres -c "psql -p $pg_port -qc \"CREATE ROLE muster LOGIN CREATEDB PASSWORD 'muster'\"" >&2
su postgres -c "psql -p $pg_port -qtAc \"SELECT 1 FROM pg_database WHERE datname='muster'\"" | grep -q 1 \
  || su postgres -c "createdb -p $pg_port -O muster muster" >&2

# Redis on loopback only.
redis_port=${MUSTER_TEST_REDIS_PORT:-6379}
if ! redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no >&2
  for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

echo "export DATABASE_URL=postgres://muster:muster@127.0.0.1:$pg_port/muster"
echo "export REDIS_URL=redis://127.0.0.1:$redis_port/0"
echo "export MUSTER_CHROMIUM=$(command -v chromium)"
