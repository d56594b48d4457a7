# Locate MLX (CMake package shipped inside the mlx-cpu / mlx-cuda-13 wheel) and the ORT headers
# (unpacked from Debian's libonnxruntime-dev by scripts/fetch_ort_headers.sh).
set(ORTMLX_VENV "${CMAKE_CURRENT_SOURCE_DIR}/.venv" CACHE PATH "Project-local Python venv")
if(NOT MLX_DIR)
  file(GLOB _mlx_candidates "${ORTMLX_VENV}/lib/python3*/site-packages/mlx/share/cmake/MLX")
  list(GET _mlx_candidates 0 _mlx_dir)
  set(MLX_DIR "${_mlx_dir}" CACHE PATH "MLX CMake package folder")
endif()
find_package(MLX CONFIG REQUIRED)
message(STATUS "MLX: ${MLX_LIBRARY} (include ${MLX_INCLUDE_DIRS})")

set(ORT_INCLUDE_DIR "${CMAKE_CURRENT_SOURCE_DIR}/build/deps/ort/include/onnxruntime"
    CACHE PATH "ONNX Runtime C/C++ headers")
if(NOT EXISTS "${ORT_INCLUDE_DIR}/onnxruntime_c_api.h")
  message(FATAL_ERROR "ORT headers not found in ${ORT_INCLUDE_DIR}: run 'make setup' first")
endif()
message(STATUS "ORT headers: ${ORT_INCLUDE_DIR}")

# OpenBLAS from the scipy-openblas32 wheel (symbols prefixed scipy_): sgemm for the fused CPU
# kernels (AttentionVJP tiled path). MLX's own CPU matmul is not used for those.
if(NOT ORTMLX_OPENBLAS_DIR)
  file(GLOB _oblas "${ORTMLX_VENV}/lib/python3*/site-packages/scipy_openblas32")
  set(ORTMLX_OPENBLAS_DIR "${_oblas}" CACHE PATH "scipy_openblas32 package folder")
endif()
find_library(ORTMLX_OPENBLAS_LIB scipy_openblas PATHS "${ORTMLX_OPENBLAS_DIR}/lib" NO_DEFAULT_PATH REQUIRED)
add_library(ortmlx_openblas SHARED IMPORTED)
set_target_properties(ortmlx_openblas PROPERTIES
  IMPORTED_LOCATION "${ORTMLX_OPENBLAS_LIB}"
  INTERFACE_INCLUDE_DIRECTORIES "${ORTMLX_OPENBLAS_DIR}/include")
message(STATUS "OpenBLAS: ${ORTMLX_OPENBLAS_LIB}")
