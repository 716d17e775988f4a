# Every target does its own set-up, so `make test` and `make demo` work on a fresh Debian machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
STACK := $(PY) -m dev.stack
PYTEST_ARGS ?=
# Images for the stack's roles (docs/local-stack.rst, "Running on the real execd"): unset, the
# stack builds its own stand-ins; set, it uses the named image as it is.
EXECD_IMAGE ?=
EGRESS_IMAGE ?=
SANDBOX_IMAGE ?=
export EXECD_IMAGE EGRESS_IMAGE SANDBOX_IMAGE

.PHONY: setup test suite unit stack-up stack-down stack-status stack-restart kube-build docs verification-record demo bench load soak lint pin pin-stack \
	dist compat compat-pin

# uv comes from PyPI when it is missing; the environment is synced to the exact pins, which
# record no download address (uv.lock would, so it is never committed).
setup: $(VENV)/.synced
$(VENV)/.synced: requirements/pinned.txt pyproject.toml
	command -v uv >/dev/null || python3 -m pip install -q uv || python3 -m pip install -q --user uv
	uv venv -q --allow-existing --python "$$(command -v python3)" $(VENV)
	uv pip sync -q --python $(PY) requirements/pinned.txt
	uv pip install -q --python $(PY) --no-deps -e .
	touch $@

# Regenerates the pins after a dependency change in pyproject.toml.
pin:
	uv lock -q
	uv export -q --no-hashes --extra opensandbox --extra pool --group dev --no-emit-project -o requirements/pinned.txt

# A release's sdist and wheel in dist/ (docs/releasing.rst): built from the committed files
# alone, with the pinned build backend and the commit's time as every entry's time, so that a
# rebuild of the commit gives the same bytes; then twine reads them as the index would.
dist: setup
	rm -rf dist
	tree="$$(mktemp -d)" && trap 'rm -rf "$$tree"' EXIT && git archive HEAD | tar -x -C "$$tree" && \
	  SOURCE_DATE_EPOCH="$$(git log -1 --format=%ct)" uv build -q \
	    --build-constraints requirements/pinned.txt --out-dir "$$PWD/dist" "$$tree"
	$(PY) -m twine check --strict dist/*

# The whole suite against a local stack; `run` stops only what it started itself. The
# benchmark is `make bench`, outside the suite: with it, a CI run would pass its 60 minutes.
# RUNTIME=kubernetes runs the tests tests/kubernetes_selection.py keeps, one at a time (the
# node's two cores hold two default sandboxes), against OpenSandbox's Kubernetes runtime on the
# local cluster (docs/kubernetes.rst, "OpenSandbox on the local cluster"): as root, with the
# Docker stack up (its images and server venv are reused) and KUBE_CONTROLLER_BIN and
# KUBE_CRDS_DIR set; the cluster and its servers stay up afterwards.
RUNTIME ?= docker
export RUNTIME
ifeq ($(RUNTIME),kubernetes)
test: setup lint docs kube-server-up
	$(MAKE) --no-print-directory suite SUITE_WORKERS=0
else
test: setup lint docs
	$(STACK) run -- $(MAKE) --no-print-directory suite
endif

# The 30 slowest tests are printed and a JUnit report is kept, so where the suite's time goes
# is known after every run. SUITE_WORKERS pytest-xdist workers share the suite in units that
# do not touch each other (tests/work_units.py): most tests wait on sandboxes rather than
# compute, so three workers keep two cores busy. SUITE_WORKERS=0 runs it in one process.
SUITE_WORKERS ?= 3
suite:
	mkdir -p artifacts
	$(PY) -m pytest -n $(SUITE_WORKERS) --durations=30 --junitxml=artifacts/junit.xml $(PYTEST_ARGS)

unit: setup
	$(PY) -m pytest tests/unit tests/tooling $(PYTEST_ARGS)

stack-up: setup
	$(STACK) up

stack-down: setup
	$(STACK) down

stack-status: setup
	$(STACK) status

# Builds the Kubernetes commands once per machine into ~/.cache (KUBE_CACHE_DIR overrides).
kube-build: setup
	$(PY) -m dev.kube build

# A single-node cluster from those binaries, Debian's etcd and a containerd of its own, run as
# root (docs/kubernetes.rst, "Local cluster"); it builds the binaries first if they are not
# cached. No test of `make test` needs it.
.PHONY: kube-up kube-down kube-status kube-server-up kube-server-down kube-server-status
kube-up: setup
	$(PY) -m dev.kube up

# OpenSandbox's controller (KUBE_CONTROLLER_BIN, its CRDs in KUBE_CRDS_DIR; built by hand, not
# here) and three Kubernetes-mode servers on the cluster, ports 18093 (plain), 18094 (dns) and 18095 (dns+nft);
# with AGENT_SANDBOX_CONTROLLER_BIN and AGENT_SANDBOX_CRDS_DIR set, agent-sandbox's controller and a
# fourth server on 18096 whose sandboxes are agent-sandbox Sandbox resources.
kube-server-up: kube-up
	$(PY) -m dev.kube server up

kube-server-down: setup
	$(PY) -m dev.kube server down

kube-server-status: setup
	$(PY) -m dev.kube server status

kube-down: setup
	$(PY) -m dev.kube down

kube-status: setup
	$(PY) -m dev.kube status

# After the execd stand-in changed: `up` rebuilds the image and restarts the servers on its own,
# this forces a restart without a change.
stack-restart: setup
	$(STACK) restart

# The stack's server runs from its own venv; its pins come from this resolution.
pin-stack:
	{ echo "# The OpenSandbox server of the local test stack (dev/stack), in its own venv because its pins"; \
	  echo "# clash with Airflow's. Regenerate with \`make pin-stack\`."; \
	  echo 'opensandbox-server==1.1.1' | uv pip compile --quiet --no-header --python-version 3.11 -; \
	} > requirements/stack-server.txt

# The compatibility matrix (docs/compatibility.rst): each Airflow line (2.11 to 3.3) with each
# OpenSandbox SDK (1.1.0, 1.1.1), in its own environment under .compat/ synced to the pins in
# requirements/compat/. Each runs the unit tests, the connection type check, the agent run and
# the attach Dag, and the table lands in artifacts/compat.json. Not part of `make test` or CI
# (~40 min of checks on two cores, plus any wait for a shared stack). COMPAT=<names> picks
# combinations; STACK_TURN=<command> waits for a shared stack's lock around each
# combination's stack checks.
COMPAT ?=
STACK_TURN ?=
compat: setup
	$(STACK) run -- $(PY) -m dev.compat run $(COMPAT) $(if $(STACK_TURN),--stack-turn "$(STACK_TURN)")

# Resolves each combination's pins from pyproject.toml's ranges; names and versions only.
compat-pin: setup
	$(PY) -m dev.compat pin $(COMPAT)

# After a whole-suite run (`make test`, or with the named images) on a committed tree: keeps its
# outcomes as the last run of its kind, which docs/verification.rst's claims table is built from.
verification-record: setup
	$(PY) -m tests.run_summary record

docs: setup
	$(PY) -m sphinx -q -W --keep-going -b html docs docs/_build/html

# The local stack plus Airflow 3 (.airflow/demo), each system-test Dag run once, their logs'
# key lines, the UI address and the login; up until Ctrl-C. ONCE=1 exits after the runs, 0
# when all succeeded; AIRFLOW_PORT=<port> picks the api-server's port, DEMO_HOME another
# Airflow home, DAGS="<dag id> ..." which system-test Dags run (all by default).
# TOPOLOGY=celery runs the Dags on the celery topology instead (docs/local-stack.rst, "Celery
# topology"; as root), in .airflow/demo-celery, and says which worker ran each task.
TOPOLOGY ?=
DEMO_HOME ?= .airflow/demo$(if $(TOPOLOGY),-$(TOPOLOGY))
demo: setup
	$(STACK) run -- $(PY) -m dev.airflow_stack demo --home $(DEMO_HOME) $(if $(ONCE),--once) \
	  $(if $(AIRFLOW_PORT),--port $(AIRFLOW_PORT)) $(if $(TOPOLOGY),--topology $(TOPOLOGY)) \
	  $(foreach dag,$(DAGS),--dag $(dag))

# Our backend beside common-ai's built-in one and the raw SDK, on the local stack, in one run
# (~20 min, the executor case about 5 of them): the table of ratios against the speed and memory
# goals, and artifacts/bench.json.
# It exits 1, naming the rows, when a goal is NOT MET or a row has no result for ours; it is
# not a gate of `make test`.
# RUNTIME=kubernetes compares the runtimes instead (benchmarks/runtimes.py, ~10 min): our
# backend on the Docker stack's server and on the local cluster's, round by round, and a server
# Pool's warm start against a cold create; with KUBE_INGRESS_BIN set too, the server's proxy, the
# ingress gateway and direct on Kubernetes (exit 1 when the gateway carries lines at less than ten
# times the proxy's rate); artifacts/bench-runtimes.json. As root, with the Docker stack up and
# KUBE_CONTROLLER_BIN and KUBE_CRDS_DIR set, as for `make test`, and KUBE_ROUTE unset.
ifeq ($(RUNTIME),kubernetes)
bench: setup kube-server-up
	$(PY) -m benchmarks.runtimes
else
bench: setup
	$(STACK) run -- $(PY) -m benchmarks
endif

# 32 agent runs at once from 4 worker processes against one server, which is killed and
# restarted mid-run, with one worker's network delayed, lossy and then cut (~5 min, as root,
# for the network namespace): outcomes, times and leftovers, and artifacts/load.json
# (docs/verification.rst, "Load and soak"). Outside `make test` and CI, as `make bench` is.
load: setup
	$(STACK) run -- $(PY) -m benchmarks.load

# Back-to-back agent runs for SOAK_MINUTES, direct and through the server: the workers' RSS,
# C heap and open file descriptors, their slope, and artifacts/soak.json. Outside `make test`
# and CI. SOAK_ARGS adds options of benchmarks/soak.py
# (`--without-sdk-telemetry`, `--name NAME`).
SOAK_MINUTES ?= 30
SOAK_ARGS ?=
soak: setup
	$(STACK) run -- $(PY) -m benchmarks.soak --minutes $(SOAK_MINUTES) $(SOAK_ARGS)

lint: setup
	$(PY) -m ruff check src tests dev system_tests benchmarks docs/_ext docs/examples
	$(PY) -m ruff format --check src tests dev system_tests benchmarks docs/_ext docs/examples
	$(PY) -m mypy src
