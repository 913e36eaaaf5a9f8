# privpost: `make demo` and `make test` work on a fresh machine with Python 3.12 or 3.13
# (ArviZ 1.x needs >= 3.12). PYTHON=/path/to/python3.12 overrides the search below.
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYCHECK := import sys; sys.exit(sys.version_info[:2] not in ((3, 12), (3, 13)))

# The first Python 3.12 / 3.13 that runs: python3.12, python3.13 on PATH (a pyenv shim for a
# version that is not selected fails to run, so it is skipped), then pyenv's installed versions
# (`pyenv root`, else ~/.pyenv), which a fresh machine has but not on PATH.
ifndef PYTHON
PYTHON := $(shell for p in python3.12 python3.13 \
	$$(ls -d "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)"/versions/3.1[23]*/bin/python3 2>/dev/null); do \
	"$$p" -c '$(PYCHECK)' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
endif

.PHONY: demo test test-slow bench install clean

# (Re)creates the venv when it is missing or was made with another Python (an older 3.11 one).
$(STAMP): pyproject.toml
	@if ! $(BIN)/python -c '$(PYCHECK)' >/dev/null 2>&1; then \
	  if [ -z "$(PYTHON)" ] || ! "$(PYTHON)" -c '$(PYCHECK)' >/dev/null 2>&1; then \
	    echo "error: privpost needs Python 3.12 or 3.13 (ArviZ 1.x); found none: not as python3.12 or python3.13 on PATH, nor under pyenv (~/.pyenv/versions/3.12.*). Install one (e.g. 'pyenv install 3.12') or run: make PYTHON=/path/to/python3.12" >&2; \
	    exit 1; fi; \
	  echo "creating $(VENV) with $(PYTHON)"; rm -rf $(VENV); "$(PYTHON)" -m venv $(VENV) || exit 1; fi
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dask,interop]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/privpost demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_damcmc.py
	$(BIN)/python benchmarks/bench_gibbs_ss.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache
