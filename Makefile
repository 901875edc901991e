# Each target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean bubblewrap

$(STAMP): pyproject.toml | bubblewrap
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint,paddle]'
	# the real GlmMoeDsaConfig for the config-semantics tests; its own dependency list is
	# heavy (datasets, scikit-learn, librosa, modelscope), and its configuration modules
	# need only what the test extra installs (docs/config.md)
	$(BIN)/python -m pip install --quiet --no-deps paddleformers==1.2.0
	touch $(STAMP)

# The sandbox that runs the audited repository's code (docs/sandbox.md): bubblewrap, else
# util-linux `unshare`. Installed when missing; where it cannot be, say what to do.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq bubblewrap) \
	  >/dev/null 2>&1 || echo "make: could not install bubblewrap: install it as root" \
	  "(apt-get install bubblewrap, dnf install bubblewrap); until then gates falls back to" \
	  "unshare (util-linux) where user namespaces are enabled, or runs only with --no-sandbox" >&2

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
	$(BIN)/python bench/bench_sandbox.py
	$(BIN)/python bench/bench_sides.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
