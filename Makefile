# Two entry points on a fresh clone: `make demo` and `make test`. Both create or reuse .venv,
# install the pinned dependencies, and build the extension; a second run is incremental.
PY ?= python3.11
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BUILD := build

.PHONY: build demo test bench compare opinfo fuzz clean

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

# The suite in Strict mode, then what must also hold in Fuse mode (DeferAndFuse) again in that mode,
# then the OpInfo slice through torch.compile(backend="tpu") (tests/test_compile.py covers both modes).
FUSE_TESTS := tests/opinfo/test_opinfo_slice.py tests/test_training.py tests/test_views.py tests/test_execution.py tests/test_modules.py tests/test_conformance.py tests/test_dynamic.py tests/test_reduction_conformance.py
test: build
	$(PYTHON) -m pytest -q tests
	TORCH_TPU_DEFER_AND_FUSE=1 $(PYTHON) -m pytest -q $(FUSE_TESTS)
	TORCH_TPU_OPINFO_COMPILE=1 $(PYTHON) -m pytest -q tests/opinfo/test_opinfo_slice.py

# The full OpInfo conformance sweep (tens of minutes): rewrites docs/op_coverage.md. MODE=fuse runs it
# in Fuse mode (DeferAndFuse), MODE=compile through torch.compile(backend="tpu"); each adds its column
# to the report.
MODE ?= strict
MODE_ENV_fuse := TORCH_TPU_DEFER_AND_FUSE=1
MODE_ENV_compile := TORCH_TPU_OPINFO_COMPILE=1
opinfo: build
ifeq ($(MODE),strict)
	$(PYTHON) -m tests.opinfo.run --full
else
	$(MODE_ENV_$(MODE)) $(PYTHON) -m tests.opinfo.run --full --results build/opinfo/results-$(MODE).jsonl --no-report
	$(PYTHON) -m tests.opinfo.report
endif

bench: build
	$(PYTHON) bench/runtime.py
	$(PYTHON) bench/eager.py
	$(PYTHON) bench/generate.py

# Random op/argument combinations on tpu vs CPU (wrong exception types, silent mismatches, aborts,
# hangs); tests/test_fuzz.py runs a short seeded slice in make test.
fuzz: build
	$(PYTHON) tools/fuzz.py --cases 5000 --seed $${SEED:-0}

# Train-step speed of every way to run the tiny Llama (PyTorch CPU eager, Inductor, JAX jit, tpu Strict,
# Fuse and compiled). JAX lives in its own environment (.venv-bench), never in the project's.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed:
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q numpy==2.4.6 jax==0.10.2 jaxlib==0.10.2
	touch $@

compare: build $(BENCH_VENV)/.installed
	$(PYTHON) bench/compare.py --jax-python $(BENCH_VENV)/bin/python

clean:
	rm -rf $(BUILD) torch_tpu/*.so

# The Hugging Face model sweep (about two hours): every Transformers architecture buildable offline from
# a tiny config, on tpu against CPU, one process per model; rewrites docs/model_coverage.md.
models: build
	$(PYTHON) tools/models.py --out docs/model_coverage.md
