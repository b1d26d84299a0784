# The README's commands.  `make run`: set up and run the whole course headless.
# `make test`: set up and run the test suite (unit tests, then every notebook).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# PyTorch is installed explicitly BEFORE the package, the build chosen for this machine by
# scripts/install.py (standard library only): no NVIDIA GPU -> the CPU build (a CPU wheel the
# configured indexes already offer, else PyTorch's CPU index, else the configured index and a check
# that it gave CPU); NVIDIA GPU -> PyPI's build (CUDA on Linux x86_64).  `python3 scripts/install.py
# plan --probe` shows the decision.  TORCH_PIP_ARGS overrides the source (e.g. "--index-url <index>"),
# TORCH_BUILD=cpu|cuda|any what the check after the install demands.
TORCH_VERSION  ?= 2.13.0
TORCH_PIP_ARGS ?=
TORCH_BUILD    ?= auto
# The `triton` extra (nvidia-pytriton) only where its wheel exists: Linux x86_64/aarch64, glibc >= 2.35.
EXTRAS ?= $(shell $(PYTHON) scripts/install.py extras 2>/dev/null || echo serve,lab,dev,scale,site)
STAMP  := $(VENV)/.labkit-setup
PROFILE ?= smoke
PYTEST_ARGS ?=

.PHONY: setup run test test-fast test-seeds lab fonts browser clean-runs strip help lint format site

help:
	@echo "make run    - set up .venv and run every notebook headless (smoke profile) -> runs/report.md"
	@echo "make test   - set up .venv and run the whole test suite (unit tests + notebooks)"
	@echo "make test-fast - unit tests only (no notebooks, servers or browser), for day-to-day work"
	@echo "make test-seeds SEEDS=\"0 1 2\" - the course over seeds (default 0-19): runs/seeds/table.md"
	@echo "make lab    - JupyterLab on 127.0.0.1 with the course open"
	@echo "make site   - the course as a static website from the executed notebooks of runs/ (make run first) -> runs/site"
	@echo "make lint   - the pre-commit hooks on every file: notebook outputs and parameters cells, ruff (tests/test_lint.py runs them in make test)"
	@echo "make format - ruff format + ruff check --fix on the code (then review and commit)"
	@echo "make setup  - only create/refresh .venv"

setup: $(STAMP)

TORCH := $(BIN)/python scripts/install.py --version "$(TORCH_VERSION)" --pip-args "$(TORCH_PIP_ARGS)" --build "$(TORCH_BUILD)"

$(STAMP): pyproject.toml Makefile scripts/install.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(TORCH) torch
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@$(TORCH) verify
	@$(MAKE) --no-print-directory fonts
	@$(MAKE) --no-print-directory browser
	@touch $(STAMP)

# matplotlib needs a CJK font for Chinese labels (labkit.viz.fonts picks it up).
fonts:
	@if fc-list 2>/dev/null | grep -qiE 'wenquanyi|noto sans cjk|source han'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get install -y -qq fonts-wqy-microhei >/dev/null 2>&1 || \
		 (apt-get update -qq && apt-get install -y -qq fonts-wqy-microhei >/dev/null)) && \
		rm -rf $$HOME/.cache/matplotlib; \
	else echo "WARNING: no CJK font; Chinese plot labels will be boxes. Install fonts-wqy-microhei (or Noto Sans CJK)."; fi

# tests/test_browser.py opens JupyterLab in Debian's Chromium through Playwright (never `playwright install`:
# its browser download cannot work here); under CI=true a missing browser fails that test.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || \
		 (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)) || \
		echo "WARNING: apt-get could not install chromium; tests/test_browser.py will skip (fail under CI=true)."; \
	else echo "WARNING: no Chromium at $(CHROMIUM); tests/test_browser.py will skip (fail under CI=true). Install Debian's chromium (as root: apt-get install chromium)."; fi

run: setup
	$(BIN)/labkit course run --profile $(PROFILE)

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The course over many seeds (hours for 0-19 on 2 cores; not part of `make test`): runs/seeds/table.md + claims.md
SEEDS ?= 0-19
test-seeds: setup
	$(BIN)/labkit course seeds --seeds $(SEEDS) $(if $(filter-out smoke,$(PROFILE)),-p PROFILE $(PROFILE))

# The course as a static website, built from the executed notebooks of a run (`make run` first; a notebook without a
# run, or whose run stopped before its claims, is refused): $(SITE_RUNS)/site.  View: python3 -m http.server -d runs/site
# `make test` builds the same site from its own run (runs/pytest/site: tests/test_site.py, after the notebooks).
SITE_RUNS ?= runs
site: setup
	$(BIN)/labkit course site --runs $(SITE_RUNS) --out $(SITE_RUNS)/site

# Day-to-day: unit tests only (no notebooks, no multi-process runs or servers, no browser). CI runs `make test`.
test-fast: setup
	$(BIN)/python -m pytest -m "not notebook and not slow and not browser" $(PYTEST_ARGS)

# Root (containers, this course's CI machines) needs --allow-root or the server refuses to start.
lab: setup
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(CURDIR) \
		$(if $(filter 0,$(shell id -u)),--allow-root) notebooks/00_start_here.ipynb

# The pre-commit hooks (.pre-commit-config.yaml: all local, run with the venv's tools, nothing fetched) on every
# tracked file; `$(BIN)/pre-commit install` once runs them before each commit.  `make format` fixes ruff's findings.
lint: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pre-commit run --all-files --show-diff-on-failure

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Committed notebooks carry no outputs (tests enforce it).
strip:
	$(BIN)/jupyter nbconvert --clear-output --inplace notebooks/*.ipynb

clean-runs:
	rm -rf runs
