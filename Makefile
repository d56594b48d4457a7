# The front door. `make demo` and `make test` do all the set-up they need.
SHELL := /bin/bash
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BUILD := $(ROOT)/build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup build demo test test-cpp test-py asan format clean bench setup-cuda build-cuda gpu-bundle test-cuda

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

# The CUDA flavour (NVIDIA GPUs): its own venv (mlx-cuda-13 and the NVIDIA wheels) and build folder.
# It compiles and links on any machine with the CUDA 13 toolkit; it runs where there is a GPU.
VENV_CUDA := $(ROOT)/.venv-cuda
BUILD_CUDA := $(ROOT)/build-cuda
CUDA_ROOT ?= /usr/local/cuda-13.0
setup-cuda:
	@bash scripts/setup.sh cuda

build-cuda: setup-cuda
	@site=$$($(VENV_CUDA)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	mkdir -p $(BUILD_CUDA) && cmake -S . -B $(BUILD_CUDA) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DORTMLX_VENV=$(VENV_CUDA) -DMLX_DIR=$$site/mlx/share/cmake/MLX -DCUDAToolkit_ROOT=$(CUDA_ROOT) \
	  -DCUDNN_INCLUDE_PATH=$$site/nvidia/cudnn/include -DCUDNN_LIBRARY_PATH=$$site/nvidia/cudnn/lib/libcudnn.so.9 \
	  $(CMAKE_FLAGS) > $(BUILD_CUDA)/cmake-configure.log 2>&1 || { cat $(BUILD_CUDA)/cmake-configure.log; exit 1; }
	@cmake --build $(BUILD_CUDA) -j $(JOBS) -- --no-print-directory

# Packs build-cuda into .gpu/ for the H200 test machine (shared/tools/gpu_bundle.sh).
gpu-bundle: build-cuda
	@bash $(ROOT)/../shared/tools/gpu_bundle.sh $(BUILD_CUDA)

# On the GPU machine, after `source .gpu/env.sh`: the whole suite on the GPU, logs under $$OUT.
test-cuda:
	@bash scripts/gpu_suite.sh

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

# Wheels that carry the library (setup.py): ortmlx-cpu from build/, ortmlx-cu13 from build-cuda/
# (the existing trees: nothing is compiled twice), into dist/. pip fetches setuptools and wheel
# for the isolated build.
DIST := $(ROOT)/dist
.PHONY: wheel wheel-cuda
wheel: build
	@rm -f $(DIST)/ortmlx_cpu-*.whl
	@ORTMLX_FLAVOUR=cpu ORTMLX_BUILD_DIR=$(BUILD) ORTMLX_JOBS=$(JOBS) $(PY) -m pip wheel -q --no-deps -w $(DIST) $(ROOT)
	@ls $(DIST)/ortmlx_cpu-*.whl

wheel-cuda: build-cuda
	@rm -f $(DIST)/ortmlx_cu13-*.whl
	@ORTMLX_FLAVOUR=cuda ORTMLX_BUILD_DIR=$(BUILD_CUDA) ORTMLX_JOBS=$(JOBS) $(VENV_CUDA)/bin/python -m pip wheel -q --no-deps -w $(DIST) $(ROOT)
	@ls $(DIST)/ortmlx_cu13-*.whl

# The cu13 wheel built and installed into a fresh venv with its MLX, then ldd on the packaged
# library (scripts/check_wheel_cuda.sh; CI runs it after build-cuda).
.PHONY: check-wheel-cuda
check-wheel-cuda: build-cuda
	@ORTMLX_VENV_CUDA=$(VENV_CUDA) ORTMLX_BUILD_CUDA=$(BUILD_CUDA) bash scripts/check_wheel_cuda.sh
