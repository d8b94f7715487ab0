# Two entry points on a fresh clone: `make demo` and `make test`. Both create or reuse .venv,
# install the pinned dependencies, and build the extension; a second run is incremental.
PY ?= python3.11
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := build

.PHONY: build demo test bench opinfo clean

$(STAMP): requirements.txt pyproject.toml setup.py
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip==25.2
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

build: $(STAMP)
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DPython_EXECUTABLE=$(abspath $(PYTHON)) >/dev/null
	@flock $(BUILD)/.lock cmake --build $(BUILD) -- -j2

# The main job: train the tiny Llama on tpu (fails if the loss does not fall).
demo: build
	$(PYTHON) examples/runtime_demo.py
	$(PYTHON) examples/tiny_llama.py --device tpu --steps 60 --report

test: build
	$(PYTHON) -m pytest -q tests

# The full OpInfo conformance sweep (tens of minutes): rewrites docs/op_coverage.md.
opinfo: build
	$(PYTHON) -m tests.opinfo.run --full

bench: build
	$(PYTHON) bench/runtime.py
	$(PYTHON) bench/eager.py

clean:
	rm -rf $(BUILD) torch_tpu/*.so
