# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo       - install what the demo needs into .venv and run the live service on SQLite
#                     (examples/service/demo.py)
#   make test       - install everything into .venv and run the whole test suite
#   make test-fast  - the unit tiers only (engine, plan, scenario, traces, importers, cli)
# Versions: pyproject.toml gives the compatible ranges, constraints.txt the exact versions used here.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet -c constraints.txt
# failures are named as they happen (tests/failures_now.py) and again at the end (-rfE); the run
# goes on after a failure, so that one run names them all. Three workers on two cores: most of an
# end-to-end test is waiting on a live master's heartbeats and graces, CPU another worker uses
# meanwhile (with two, the cores were busy about 40% of the run). loadgroup keeps a module whose
# tests share one master, browser or venv on one worker (tests/conftest.py names the groups).
PYTEST := $(PY) -m pytest -n 3 --dist loadgroup -p no:cacheprovider -p tests.failures_now -rfE

$(VENV)/.made:
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	touch $@

# the demo needs the master and an agent: apportion[server,agent]
$(VENV)/.installed-demo: pyproject.toml constraints.txt $(VENV)/.made
	$(PIP) -e '.[server,agent]'
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt $(VENV)/.made
	$(PIP) -e '.[test]'
	touch $@

.PHONY: demo test test-fast
demo: $(VENV)/.installed-demo
	$(PY) examples/service/demo.py

test: $(VENV)/.installed
	$(PYTEST)

test-fast: $(VENV)/.installed
	$(PYTEST) -m "not slow" tests/engine tests/plan tests/scenario tests/traces tests/importers tests/cli
