# memoryui: two commands do everything on a fresh machine.
#   make demo   set up, import real data, run the product on 127.0.0.1:8000
#   make test   set up, run every test against real PostgreSQL and Redis
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench install

$(VENV)/.installed: requirements.txt requirements-dev.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	bin/demo

test: $(VENV)/.installed
	bin/test

bench: $(VENV)/.installed
	$(PY) -m bench.run
