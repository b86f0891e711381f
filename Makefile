# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   - install into .venv and run `apportion solve` on a shipped example
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
	$(VENV)/bin/apportion solve examples/01-ownership-and-lending.yaml

test: $(VENV)/.installed
	$(PY) -m pytest -n 2 -p no:cacheprovider
