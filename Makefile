# Everything installs into .venv inside the repo; nothing is needed on the machine but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench bench-peers bench-ray bench-report browser clean mutation

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: install
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

test: install lint browser
	$(BIN)/python -m pytest

# The report's browser tests drive Debian's chromium (Playwright cannot download browsers
# here). Installed when missing and we are root; otherwise those tests say how (and fail
# in CI).
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) || \
		echo "could not install chromium: apt-get update && apt-get install -y chromium"

# The example suite on an offline example agent: no API key, no network.
demo: install
	$(BIN)/agentv eval examples/ --target default

bench: install
	$(BIN)/python benchmarks/run.py

bench-peers: install
	$(BIN)/python benchmarks/peers.py

# S7: --executor ray against the local executor, and a simulated Ray cluster (about 6 minutes).
bench-ray: install
	$(BIN)/python benchmarks/s7_ray.py

# The HTML report of 100,000 cases: its size and the time to its first rows in chromium.
bench-report: install browser
	$(BIN)/python benchmarks/report_bench.py

# Mutation testing (docs/testing.md): not part of `test`, a few minutes on 2 cores. Results
# are kept in mutants/ (git-ignored); a rerun only retests what changed.
mutation: install
	$(BIN)/mutmut run
	$(BIN)/python tests/mutation_report.py --survivors

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .agentv/results
