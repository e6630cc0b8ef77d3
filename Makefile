# The two set-up commands of the README: `make demo` and `make test`. Each creates .venv when it
# is missing (or when pyproject.toml changed) and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean manual

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dbcrew demo

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

# The PostgreSQL manual `dbcrew ask` retrieves from (Debian's postgresql-doc-15), installed when absent and root.
manual:
	@test -d /usr/share/doc/postgresql-doc-15/html || [ "$$(id -u)" != 0 ] || \
	  { apt-get install -y -q postgresql-doc-15 >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q postgresql-doc-15 >/dev/null; }; }

bench: $(STAMP) manual
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) reports .dbcrew
