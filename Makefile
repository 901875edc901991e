# Each target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint,paddle,report]'
	# the real GlmMoeDsaConfig for the config-semantics tests; its own dependency list is
	# heavy (datasets, scikit-learn, librosa, modelscope), and its configuration modules
	# need only what the test extra installs (docs/config.md)
	$(BIN)/python -m pip install --quiet --no-deps paddleformers==1.2.0
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gates demo

# a real headless browser opens the HTML report in the tests (tests/test_report.py)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "make: chromium is missing and could not be installed: install Debian's chromium \
	(apt-get install chromium) or put a chromium on PATH; the browser test is skipped without it"

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/bench_audit.py
	$(BIN)/python bench/bench_loss.py
	$(BIN)/python bench/bench_trust.py
	$(BIN)/python bench/bench_report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
