# Locate the C++ pieces that ship inside the executorch and tosa-tools wheels.
#
# The build runs in uv's isolated build environment, which gets the same executorch and tosa-tools
# versions as the project (extra-build-dependencies with match-runtime in the root pyproject). We
# ask that Python where its site-packages is; RUNTIME_CPP_PYTHON overrides (a manual build).
if(RUNTIME_CPP_PYTHON)
  set(_python "${RUNTIME_CPP_PYTHON}")
else()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(_python "${Python3_EXECUTABLE}")
endif()
execute_process(
  COMMAND "${_python}" -c "import importlib.util as u; print(list(u.find_spec('executorch').submodule_search_locations)[0])"
  OUTPUT_VARIABLE RUNTIME_CPP_EXECUTORCH_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "runtime-cpp: ${_python} cannot import executorch; build with "
                      "`uv sync` from the workspace root (it provides executorch==1.5.1 to the build)")
endif()
get_filename_component(RUNTIME_CPP_SITE_PACKAGES "${RUNTIME_CPP_EXECUTORCH_DIR}" DIRECTORY)

find_package(executorch REQUIRED CONFIG PATHS "${RUNTIME_CPP_EXECUTORCH_DIR}/share/cmake" NO_DEFAULT_PATH)
# One interface target for the runtime, whichever route the package config took (imported targets
# need CMake >= 3.28; Debian 12 has 3.25, so the variables route is the common one here).
add_library(runtime_cpp_executorch INTERFACE)
target_include_directories(runtime_cpp_executorch SYSTEM INTERFACE ${EXECUTORCH_INCLUDE_DIRS})
target_compile_definitions(runtime_cpp_executorch INTERFACE ${EXECUTORCH_COMPILE_DEFINITIONS})
# Only libexecutorch.so: it holds the backend registry the pip runtime reads. Kernels and other
# delegates are the Python extension's business.
find_library(RUNTIME_CPP_LIBEXECUTORCH executorch PATHS "${RUNTIME_CPP_EXECUTORCH_DIR}/lib" NO_DEFAULT_PATH REQUIRED)
target_link_libraries(runtime_cpp_executorch INTERFACE "${RUNTIME_CPP_LIBEXECUTORCH}")
get_filename_component(RUNTIME_CPP_EXECUTORCH_LIBDIR "${RUNTIME_CPP_LIBEXECUTORCH}" DIRECTORY)

# tosa-tools: the reference model and serialization static libraries plus headers.
set(RUNTIME_CPP_TOSA_PREFIX "${RUNTIME_CPP_SITE_PACKAGES}")
if(EXISTS "${RUNTIME_CPP_TOSA_PREFIX}/lib64/libtosa_reference_model_lib.a")
  set(RUNTIME_CPP_HAVE_TOSA_TOOLS ON)
else()
  set(RUNTIME_CPP_HAVE_TOSA_TOOLS OFF)
endif()
message(STATUS "runtime-cpp: executorch at ${RUNTIME_CPP_EXECUTORCH_DIR}; tosa-tools: ${RUNTIME_CPP_HAVE_TOSA_TOOLS}")
