# Every check and test tier, one stage each. `bash hack/test.sh` installs, runs `make check`, builds what
# the tiers need and runs `make tiers`; on a developer's machine each stage runs alone (tests/conftest.py
# says which tests each tier holds).
#
#   check         ruff, ruff format, mypy, generated files, import layering: seconds, run it first
#   fast          the part of unit that starts no process (no local run, training, gunicorn): under a minute
#   unit          the hermetic tiers (unit, HTTP, in-process servers, local runs, small fuzz): a bare pytest
#   e2e           a real control plane, and the helm/kubectl tests (hack/build-control-plane.sh)
#   differential  our operator against Kubeflow's (hack/build-kubeflow.sh)
#   node          a real kubelet + containerd node; needs root (hack/build-node.sh, build-training-images.sh)
#   image         the image under podman (hack/build-image.sh)
#   browser       the web UI in Debian's chromium with playwright (hack/install-browser.sh)
#   fuzz          the volume fuzz, derandomized: the same commit gives the same verdict on any machine
#   explore       fresh random fuzzing for EXPLORE_SECONDS (not part of `all`: it may find a new bug on any
#                 commit); a bug it finds becomes an explicit example, tests/fuzzing.py says how
#   tiers         every tier, then fuzz; `make -k tiers` runs every stage even after one failed
#   all           check, then tiers
#   release       hack/release.sh of pyproject's version into dist/ (VERSION=x.y.z for another;
#                 docs/release.md), signed with TRAINOP_RELEASE_SIGNING_KEY (RELEASE_FLAGS=--unsigned
#                 without); the node tier's tests/e2e_node/test_release.py runs it too
#
# Any pytest exit but 0 fails its stage, 5 (nothing collected: a marker or path that selects no test) too.

PYTHON ?= python3
# The N slowest tests of each stage (hack/test.sh: 25); empty prints none. Extra pytest arguments too.
DURATIONS ?=
PYTEST_ARGS ?=
PYTEST = $(PYTHON) -m pytest $(if $(DURATIONS),--durations=$(DURATIONS)) $(PYTEST_ARGS)
# Examples per fuzz suite at volume (the bare run draws 200), and explore's round size and time budget.
FUZZ_EXAMPLES ?= $(or $(TRAINOP_FUZZ_EXAMPLES_CI),10000)
EXPLORE_EXAMPLES ?= 2000
EXPLORE_SECONDS ?= $(or $(TRAINOP_EXPLORE_SECONDS),300)

# The fuzz suites, in two groups that run side by side (one per core): hooks, and webhooks.
FUZZ_HOOKS = tests/hooks/test_fuzz_hostile.py tests/trainjob/test_fuzz_sync.py \
  tests/test_fuzz_gunicorn.py::test_hostile_hook_calls_never_get_a_5xx_or_kill_a_worker
FUZZ_WEBHOOKS = tests/webhooks/test_fuzz.py -k hostile \
  tests/test_fuzz_gunicorn.py::test_hostile_admission_reviews_never_get_a_5xx_or_kill_a_worker

# Examples per fuzz suite in the fast tier: enough to exercise every route, the volume is fuzz's.
FAST_FUZZ_EXAMPLES ?= 25
# The fast tier's first half (the second is every other test); halves of about equal time, measured.
FAST_HALF = tests/controller tests/frameworks tests/job tests/hooks tests/webhooks

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
# Stages run in the order given even under -j: check first, and tiers that each start servers do not
# compete for the same two cores.
.NOTPARALLEL:
.PHONY: all tiers check fast unit e2e differential node image browser fuzz explore release

all: check tiers
# hack/test.sh runs unit alone first (the examples' images build meanwhile), then after-unit.
AFTER_UNIT = e2e differential node image browser fuzz
tiers: unit $(AFTER_UNIT)
after-unit: $(AFTER_UNIT)

check:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy
	$(PYTHON) -m trainop.cli crds --check
	$(PYTHON) -c 'from importlinter.cli import lint_imports_command; lint_imports_command()'

# tests/conftest.py gives the `fast` marker (`unit` runs these tests too). Two processes side by side, one
# per core, as fuzz: the folders of FAST_HALF, and every other test (the same paths ignored), so that
# together they are exactly `pytest -m fast` (tests/test_tiers.py). Lines are prefixed with the half.
fast:
	export TRAINOP_FUZZ_EXAMPLES=$(FAST_FUZZ_EXAMPLES)
	$(PYTEST) -q -p no:cacheprovider -m fast $(FAST_HALF) 2>&1 | sed -u 's/^/[fast 1] /' &
	first=$$!
	$(PYTEST) -q -p no:cacheprovider -m fast $(addprefix --ignore=,$(FAST_HALF)) 2>&1 | sed -u 's/^/[fast 2] /' &
	second=$$!
	status=0
	wait $$first || status=$$?
	wait $$second || status=$$?
	exit $$status

unit:
	$(PYTEST)

e2e differential node image browser:
	$(PYTEST) -m $@

# Each group's lines are prefixed with its name; the stage fails when either group fails. The cache
# provider is off: two pytest processes would write the same .pytest_cache.
fuzz:
	export TRAINOP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) PYTHONHASHSEED=0
	$(PYTEST) -q -p no:cacheprovider $(FUZZ_HOOKS) 2>&1 | sed -u 's/^/[fuzz hooks] /' &
	hooks=$$!
	$(PYTEST) -q -p no:cacheprovider $(FUZZ_WEBHOOKS) 2>&1 | sed -u 's/^/[fuzz webhooks] /' &
	webhooks=$$!
	status=0
	wait $$hooks || status=$$?
	wait $$webhooks || status=$$?
	exit $$status

# Rounds of EXPLORE_EXAMPLES fresh random examples per suite, both groups side by side, until
# EXPLORE_SECONDS have passed or a round fails. Hypothesis's example database (.hypothesis/) replays
# what an earlier round or run found before it draws new examples.
explore:
	export TRAINOP_FUZZ_EXAMPLES=$(EXPLORE_EXAMPLES)
	deadline=$$(( $$(date +%s) + $(EXPLORE_SECONDS) ))
	rounds() {
	  local name=$$1 round=0
	  shift
	  while (( $$(date +%s) < deadline )); do
	    round=$$(( round + 1 ))
	    echo "round $$round: $$(( deadline - $$(date +%s) )) s left"
	    $(PYTEST) -q -p no:cacheprovider --hypothesis-profile=explore -x "$$@" || exit
	  done 2>&1 | sed -u "s/^/[explore $$name] /"
	}
	rounds hooks $(FUZZ_HOOKS) &
	hooks=$$!
	rounds webhooks $(FUZZ_WEBHOOKS) &
	webhooks=$$!
	status=0
	wait $$hooks || status=$$?
	wait $$webhooks || status=$$?
	exit $$status

release:
	bash hack/release.sh $(or $(VERSION),$$($(PYTHON) hack/lib/versions.py current)) $(RELEASE_FLAGS)
