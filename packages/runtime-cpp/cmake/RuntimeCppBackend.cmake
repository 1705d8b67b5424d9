# The plug-in convention for backend subfolders (README.md "Adding a backend").
#
#   runtime_cpp_add_backend(<name> BACKEND_IDS <id>... SOURCES <file>... [LIBS <target>...])
#     builds the shared module _backend_<name>.so into the runtime_cpp package. The module must
#     define `extern "C" int runtime_cpp_register_<name>(void)` (RUNTIME_CPP_REGISTER_FN in
#     common/registration.h) that registers its backends and returns the executorch Error code.
#   runtime_cpp_skip_backend(<name> BACKEND_IDS <id>... REASON <text> FIX <command>)
#     records that the backend was not built (a missing SDK, Vulkan headers, glslc ...).
#
# Both append to the manifest (_build_manifest.json) that runtime_cpp.backends() reads.
set_property(GLOBAL PROPERTY RUNTIME_CPP_MANIFEST "")

function(_runtime_cpp_manifest_entry name ids built reason fix)
  list(JOIN ids "\",\"" _ids)
  string(REPLACE "\\" "\\\\" reason "${reason}")
  string(REPLACE "\"" "\\\"" reason "${reason}")
  string(REPLACE "\\" "\\\\" fix "${fix}")
  string(REPLACE "\"" "\\\"" fix "${fix}")
  set(_entry "{\"name\":\"${name}\",\"backend_ids\":[\"${_ids}\"],\"built\":${built},\"module\":\"_backend_${name}\",\"reason\":\"${reason}\",\"fix\":\"${fix}\"}")
  set_property(GLOBAL APPEND PROPERTY RUNTIME_CPP_MANIFEST "${_entry}")
endfunction()

function(runtime_cpp_add_backend name)
  cmake_parse_arguments(ARG "" "" "BACKEND_IDS;SOURCES;LIBS" ${ARGN})
  set(_target runtime_cpp_backend_${name})
  add_library(${_target} MODULE ${ARG_SOURCES})
  set_target_properties(${_target} PROPERTIES OUTPUT_NAME "_backend_${name}" PREFIX "")
  target_link_libraries(${_target} PRIVATE runtime_cpp_common ${ARG_LIBS})
  target_compile_definitions(${_target} PRIVATE RUNTIME_CPP_BACKEND_NAME=${name})
  runtime_cpp_strict(${_target})
  # The wheel's libexecutorch.so, found next to the executorch package: the same file the pip
  # runtime's extension loads, so our registrations land in the registry it reads.
  file(RELATIVE_PATH _rel "${RUNTIME_CPP_SITE_PACKAGES}/runtime_cpp" "${RUNTIME_CPP_EXECUTORCH_LIBDIR}")
  set_target_properties(${_target} PROPERTIES
    INSTALL_RPATH "$ORIGIN/${_rel}"
    BUILD_RPATH "${RUNTIME_CPP_EXECUTORCH_LIBDIR}")
  # Keep static archives (reference model, flatbuffers) private to the module: the Python
  # tosa_reference_model extension carries its own copies.
  target_link_options(${_target} PRIVATE "-Wl,--exclude-libs,ALL" "-Wl,--no-undefined")
  install(TARGETS ${_target} LIBRARY DESTINATION .)
  _runtime_cpp_manifest_entry("${name}" "${ARG_BACKEND_IDS}" true "" "")
endfunction()

function(runtime_cpp_skip_backend name)
  cmake_parse_arguments(ARG "" "REASON;FIX" "BACKEND_IDS" ${ARGN})
  message(WARNING "runtime-cpp: backend '${name}' not built: ${ARG_REASON} (fix: ${ARG_FIX})")
  _runtime_cpp_manifest_entry("${name}" "${ARG_BACKEND_IDS}" false "${ARG_REASON}" "${ARG_FIX}")
endfunction()

# Warnings as errors on our code, sanitizers when asked.
function(runtime_cpp_strict target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-unused-parameter)
  if(RUNTIME_CPP_SANITIZE)
    list(JOIN RUNTIME_CPP_SANITIZE "," _san)
    target_compile_options(${target} PRIVATE -fsanitize=${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${_san})
  endif()
endfunction()

function(runtime_cpp_write_manifest)
  get_property(_entries GLOBAL PROPERTY RUNTIME_CPP_MANIFEST)
  list(JOIN _entries ",\n  " _body)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/_build_manifest.json" "[\n  ${_body}\n]\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/_build_manifest.json" DESTINATION .)
endfunction()
