# The front door. `make demo` and `make test` do all the set-up they need.
SHELL := /bin/bash
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BUILD := $(ROOT)/build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup build demo test test-cpp test-py asan format clean bench

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) > $(BUILD)/cmake-configure.log 2>&1 || { cat $(BUILD)/cmake-configure.log; exit 1; }
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

demo: build
	@$(PY) -m ortmlx demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(PY) -m pytest -q tests

test-cpp: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-py: build
	@$(PY) -m pytest -q tests

# Op suite under AddressSanitizer/UBSan (separate build tree).
asan: setup
	@cmake -S . -B $(ROOT)/build-asan -DORTMLX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug > /dev/null
	@cmake --build $(ROOT)/build-asan -j $(JOBS)
	@cd $(ROOT)/build-asan && ctest --output-on-failure
	@ORTMLX_LIBRARY=$(ROOT)/build-asan/libortmlx.so LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" ASAN_OPTIONS=detect_leaks=0 $(PY) -m pytest -q tests/ops

format:
	@clang-format -i $$(git ls-files 'src/*.cpp' 'src/*.h' 'tests/cpp/*.cpp')

clean:
	rm -rf $(BUILD)/CMakeFiles $(BUILD)/libortmlx.so
