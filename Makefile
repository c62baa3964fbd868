# Everything installs inside the repository; nothing is needed on the machine but python3.
# uv (pinned below) is bootstrapped from PyPI into .tools/, then installs the locked set of
# uv.lock into .venv. docs/maintainers/dependencies.md says how to change a dependency.
PYTHON ?= python3
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LATEST := .venv-latest

# uv uses the machine's Python, never one it downloads, and keeps the venv where the
# Makefile says (an activated venv elsewhere must not redirect it).
export UV_PYTHON := $(PYTHON)
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# Compile .pyc files at install, as pip does: uv leaves them out by default, and where
# PYTHONDONTWRITEBYTECODE is set every start-up would compile the SDKs again (seconds).
export UV_COMPILE_BYTECODE := 1
unexport VIRTUAL_ENV

.PHONY: install lock lock-upgrade dist test test-fast test-latest lint docs docs-serve demo bench bench-peers bench-ray bench-report bench-rows bench-view screenshots browser sandbox clean mutation

install: $(STAMP)

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet 'uv==$(UV_VERSION)'

# The locked set: every extra (the tests use every provider SDK and Ray) and the dev group.
$(STAMP): $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --all-extras
	touch $(STAMP)

# After changing pyproject.toml: record the new requirement, keeping every other version.
lock: $(UV)
	$(UV) lock

# Move every locked version to the newest that pyproject.toml allows.
lock-upgrade: $(UV)
	$(UV) lock --upgrade

lint: install
	$(BIN)/ruff check src tests benchmarks examples tools
	$(BIN)/ruff format --check src tests benchmarks examples tools

# The sdist and the wheel, in dist/ (uv build): what `pip install dist/agentv-*.whl` installs
# into a project of one's own (docs/install.md). tests/test_wheel.py installs the wheel into
# a fresh virtual environment outside the repository and runs it there.
dist: $(UV)
	rm -rf dist
	$(UV) build --out-dir dist

# On every core, each test file in one worker: a file's fixtures (a local Ray, a browser)
# start once, and its tests never race each other.
test: install lint browser sandbox docs
	$(BIN)/python -m pytest -n auto --dist loadfile

# The inner loop: the tests that start no process, Ray, browser or npm (not marked slow,
# docs/testing.md); no lint, no docs build.
test-fast: install
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not slow"

# The suite against the newest versions pyproject.toml allows (no lock), in its own venv:
# drift in a dependency shows here before a user's fresh install meets it.
test-latest: $(UV) browser sandbox
	rm -rf $(LATEST)
	$(UV) venv --quiet $(LATEST)
	VIRTUAL_ENV=$(LATEST) $(UV) pip install --quiet --upgrade -e '.[all,ray]' --group dev
	$(LATEST)/bin/python -m pytest

# The manual (docs/) as a site in site/; strict: a broken link or reference fails the build.
docs: install
	$(BIN)/mkdocs build --strict --quiet

docs-serve: install
	$(BIN)/mkdocs serve

# The report's browser tests drive Debian's chromium (Playwright cannot download browsers
# here). Installed when missing and we are root; otherwise those tests say how (and fail
# in CI).
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) || \
		echo "could not install chromium: apt-get update && apt-get install -y chromium"

# Bubblewrap, the sandbox of `isolation: bwrap`: its tests run it for real.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap) || \
		echo "could not install bubblewrap: apt-get update && apt-get install -y bubblewrap"

# The example suite on an offline example agent: no API key, no network.
demo: install
	@echo "agentv demo: the 5 example cases of examples/ (multi-turn conversations, guideline"
	@echo "and attached files, tool calls, a live conversation the agent takes part in,"
	@echo "deterministic checks and a judge) on an offline example agent. Its llm_judge checks are"
	@echo "graded by an offline stand-in that only counts the outcome's words found in the answer,"
	@echo "so expect 3 passed and 2 failed: the failed ones show how a miss is reported. With"
	@echo "OPENAI_API_KEY set, --target openai grades by meaning instead."
	@echo
	@# a failed case fails agentv eval (exit 7, as a failed test fails pytest): expected here
	$(BIN)/agentv eval examples/ --target default; status=$$?; \
	if [ $$status -eq 7 ]; then \
		echo; \
		echo "agentv eval exited 7 because cases failed, as expected here: in CI a failed case"; \
		echo "fails the job (--threshold SCORE gates on the mean score instead)."; \
	else exit $$status; fi

# S1-S6, then S8 (live conversations); both run even when the first misses a goal.
bench: install
	$(BIN)/python benchmarks/run.py; status=$$?; $(BIN)/python benchmarks/s8_live.py && exit $$status

bench-peers: install
	$(BIN)/python benchmarks/peers.py

# S7: --executor ray against the local executor, and a simulated Ray cluster (about 6 minutes).
bench-ray: install
	$(BIN)/python benchmarks/s7_ray.py

# Cases from data: rows per second from CSV, JSON Lines and Parquet into requests on the
# mock target, and peak memory, at 1,000,000 rows (about 25 minutes).
bench-rows: install
	$(BIN)/python benchmarks/rows_bench.py

# The HTML report of 100,000 cases: its size and the time to its first rows in chromium.
bench-report: install browser
	$(BIN)/python benchmarks/report_bench.py

# The run store and the workbench at 100,000 records: import speed, time to first rows.
bench-view: install browser
	$(BIN)/python benchmarks/view_bench.py

# The workbench's screenshots in docs/images/, taken from a real workbench over an example
# store (tools/view_example.py).
screenshots: install browser
	$(BIN)/python tools/view_screenshots.py

# Mutation testing (docs/testing.md): not part of `test`, a few minutes on 2 cores. Results
# are kept in mutants/ (git-ignored); a rerun only retests what changed.
mutation: install
	$(BIN)/mutmut run
	$(BIN)/python tests/mutation_report.py --survivors

clean:
	rm -rf $(VENV) $(LATEST) $(TOOLS) site dist .pytest_cache .ruff_cache .agentv/results
