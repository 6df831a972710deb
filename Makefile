# The two commands that head the README: `make run` and `make test`.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint check bench bench-sharing replay clean testcluster-build testcluster-up testcluster-down testcluster-smoke

$(STAMP): requirements.txt requirements-dev.txt constraints.txt client/pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is needed (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# setuptools warns at every editable install that a folder named like the package in the working directory would
	@# shadow it; the client's package (muster_client) has no such twin here, and the banner pushed the first start's
	@# own lines off the screen.
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	touch $(STAMP)

## Run Muster on this machine with its embedded defaults: SQLite, the embedded broker, the simulated cluster.
run: $(STAMP)
	VENV=$(VENV) scripts/run-local.sh

## Run the whole test suite (PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set), printing the slowest tests and the time.
## By default all but tests/e2e/ run on 2 pytest-xdist workers, then tests/e2e/ (servers, Redis, the test cluster) serially; PYTEST_WORKERS=1 runs everything serially.
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run
ifeq ($(PYTEST_WORKERS),1)
	$(PY) -m pytest --durations=15 $(PYTEST_ARGS)
else
	$(PY) -m pytest --durations=15 -n $(PYTEST_WORKERS) --dist loadgroup --ignore=tests/e2e $(PYTEST_ARGS)
	$(PY) -m pytest --durations=15 tests/e2e $(PYTEST_ARGS)
endif

lint: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf var .pytest_cache

## Benchmarks, one JSON line per case: the scheduler (benchmarks/bench_scheduler.py), a 32-node launch and the node inventory among 2,000
## other pods on the test cluster (bench_node_inventory.py), the job page's telemetry,
## the reads at 1,000 and 20,000 pending and 200 and 4,000 running jobs (benchmarks/bench_reads.py), and the API through a live gunicorn on
## PostgreSQL (benchmarks/bench_api.py: submits with 10,000 pending, arrays, reads at 1,000 and 20,000, a cold page), and a
## running job's page and the dashboard in Chromium (benchmarks/bench_page_load.py: DOMContentLoaded and charts drawn).
bench: $(STAMP)
	$(PY) -m benchmarks.bench_scheduler
	$(PY) -m benchmarks.bench_launch
	$(PY) -m benchmarks.bench_node_inventory
	$(PY) -m benchmarks.bench_telemetry
	$(PY) -m benchmarks.bench_reads
	$(PY) -m benchmarks.bench_api
	$(PY) -m benchmarks.bench_page_load
	$(PY) -m benchmarks.sharing

## GPU sharing alone: the same mixed stream of quarter-GPU and whole-node jobs with and without shared nodes.
bench-sharing: $(STAMP)
	$(PY) -m benchmarks.sharing

## The what-if replay benchmark (replay/bench.py): one JSON line per policy and offered load.
replay: $(STAMP)
	$(PY) -m replay.bench

## Local Kubernetes test cluster (platform/testcluster/README.md): a real API server, simulated GPU nodes.
## Build its binaries into ~/.cache/muster-testcluster (slow the first time only).
testcluster-build:
	@platform/testcluster/build.sh

## Start it; prints `export KUBECONFIG=...` and the nodes' rack and block labels (eval "$$(make testcluster-up)" sets them in your shell).
testcluster-up: testcluster-build
	@platform/testcluster/up.sh

## Stop it and remove its run dir.
testcluster-down:
	platform/testcluster/down.sh

## Check a running test cluster with kubectl: scheduling, simulated runs, GC, logs.
testcluster-smoke:
	platform/testcluster/smoke.sh
