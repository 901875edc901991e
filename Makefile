# Each target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

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

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/bench_audit.py
	$(BIN)/python bench/bench_loss.py
	$(BIN)/python bench/bench_trust.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
