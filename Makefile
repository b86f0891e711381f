# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   - install into .venv and run the live service on SQLite (examples/service/demo.py)
#   make test   - install into .venv and run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

.PHONY: demo test
demo: $(VENV)/.installed
	$(PY) examples/service/demo.py

test: $(VENV)/.installed
	$(PY) -m pytest -n 2 -p no:cacheprovider
