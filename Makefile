# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Both create .venv once, install dltune with everything it needs, and are fast the second time.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMPS := .make-stamps
# The tests keep their artefacts (the tiny knowledge base, compiled Theano and PyTensor caches)
# in this checkout; everything else uses dltune's default cache, so the legacy runtime that
# `make` installs is the one `.venv/bin/dltune` finds afterwards.
TEST_CACHE := $(or $(DLTUNE_CACHE),$(CURDIR)/.cache/dltune)

.PHONY: demo test lint legacy system-deps clean example-report

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch is pinned to the CPU wheel (a looser pin pulls a multi-GB CUDA build).
	$(PY) -m pip install -q -e '.[all,dev]'
	@touch $@

$(STAMPS)/legacy: $(STAMPS)/venv dltune/envs/_legacy.py
	$(PY) -m dltune.cli env install legacy
	@touch $@

legacy: $(STAMPS)/legacy

# PostgreSQL (distributed-tuning tests start their own server) and Chromium (the report is
# rendered headless) from Debian's packages, installed when missing and we may.
system-deps:
	@need=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$$need postgresql"; \
	command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	if [ -z "$$need" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing$$need from Debian's packages"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null; \
	else \
		echo "note: install$$need (Debian packages) for the tests that need them"; \
	fi

# The main job on the embedded default: bundled digits data, the shipped knowledge base,
# SQLite storage (dltune.db here). Recommend (instant) and verify it with a real run, tune
# briefly, then measure every available framework side by side.
demo: $(STAMPS)/venv $(STAMPS)/legacy
	$(PY) -m dltune.cli env status
	$(PY) -m dltune.cli recommend --workload digits --model lenet --verify
	$(PY) -m dltune.cli tune --workload digits --model mlp --frameworks torch,tensorflow --trials 6 --storage sqlite:///dltune.db --repeat-best 3
	$(PY) -m dltune.cli bench --workload digits --model lenet --frameworks all --epochs 5

# docs/example-report: the study on digits, then its report. Run it on an otherwise idle machine
# (the report flags runs measured under load).
example-report: $(STAMPS)/venv $(STAMPS)/legacy
	cd "$$(mktemp -d)" && $(CURDIR)/$(PY) -m dltune study --workload digits --time-budget 40m --max-epochs 5 \
		&& $(CURDIR)/$(PY) -m dltune report --format md --out $(CURDIR)/docs/example-report/report.md

# Two pytest-xdist workers, each running whole test files (tests/conftest.py: _work_unit).
test: $(STAMPS)/venv $(STAMPS)/legacy system-deps
	$(VENV)/bin/ruff check dltune tests benchmarks examples scripts
	$(VENV)/bin/lint-imports --no-cache
	DLTUNE_CACHE=$(TEST_CACHE) $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

lint: $(STAMPS)/venv
	$(VENV)/bin/ruff check dltune tests benchmarks examples scripts
	$(VENV)/bin/lint-imports --no-cache

clean:
	rm -rf $(VENV) $(STAMPS) .cache
