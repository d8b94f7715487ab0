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

# The suite in Strict mode, then what must also hold in Fuse mode (DeferAndFuse) again in that mode.
FUSE_TESTS := tests/opinfo/test_opinfo_slice.py tests/test_training.py tests/test_views.py tests/test_execution.py tests/test_modules.py
test: build
	$(PYTHON) -m pytest -q tests
	TORCH_TPU_DEFER_AND_FUSE=1 $(PYTHON) -m pytest -q $(FUSE_TESTS)

# The full OpInfo conformance sweep (tens of minutes): rewrites docs/op_coverage.md. MODE=fuse runs it
# in Fuse mode (DeferAndFuse) and adds that column to the report.
MODE ?= strict
opinfo: build
ifeq ($(MODE),fuse)
	TORCH_TPU_DEFER_AND_FUSE=1 $(PYTHON) -m tests.opinfo.run --full --results build/opinfo/results-fuse.jsonl --no-report
	$(PYTHON) -m tests.opinfo.report
else
	$(PYTHON) -m tests.opinfo.run --full
endif

bench: build
	$(PYTHON) bench/runtime.py
	$(PYTHON) bench/eager.py
	$(PYTHON) bench/generate.py

clean:
	rm -rf $(BUILD) torch_tpu/*.so
