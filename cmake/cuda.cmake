# The CUDA backend (src/cuda/, kernels in cuda/), included by the top CMakeLists.txt right after
# flashcl_objects is defined.
#
# FLASHCL_CUDA: AUTO (default; on when nvcc >= 12.0 and cuda.h are found), ON (fail without
# them) or OFF. The kernels are compiled ahead of time by nvcc into one fatbinary (cubins for
# FLASHCL_CUDA_ARCHS plus PTX for FLASHCL_CUDA_PTX, which newer GPUs JIT-compile) and embedded as
# a C array, so the library needs no CUDA language support in CMake, no CUDA toolkit at run time
# and no libcuda at link time: src/cuda/driver.c dlopens the driver (-ldl).
#
# Always (with or without the backend): src/api_cuda.c, whose entry points then report
# FLASHCL_UNSUPPORTED, and the installed header include/flashcl_cuda.h.

target_sources(flashcl_objects PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src/api_cuda.c)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/include/flashcl_cuda.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(FLASHCL_HAVE_CUDA OFF)
if(NOT FLASHCL_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FLASHCL_CUDA='${FLASHCL_CUDA}': use AUTO, ON or OFF")
endif()
if(FLASHCL_CUDA STREQUAL "OFF")
  message(STATUS "flashcl: CUDA backend off (FLASHCL_CUDA=OFF)")
  return()
endif()

set(FLASHCL_CUDA_ARCHS "80;86;89;90a" CACHE STRING
    "CUDA architectures compiled to cubins (sm_XX) for the CUDA backend")
set(FLASHCL_CUDA_PTX "90" CACHE STRING
    "CUDA virtual architectures embedded as PTX, JIT-compiled on newer GPUs (empty: none)")
set(FLASHCL_NVCC_FLAGS "" CACHE STRING
    "Extra nvcc flags for the CUDA kernels (e.g. -ccbin <compiler> or -allow-unsupported-compiler)")

# --- find nvcc and cuda.h (no enable_language(CUDA): only the fatbinary is built with nvcc) ---
find_program(FLASHCL_NVCC nvcc
  HINTS ${CUDAToolkit_ROOT} ENV CUDAToolkit_ROOT ENV CUDA_PATH ENV CUDA_HOME
  PATH_SUFFIXES bin
  PATHS /usr/local/cuda /opt/cuda
  DOC "nvcc that compiles flashcl's CUDA kernels")

# Why the backend cannot be built, or empty.
set(_flashcl_cuda_missing "")
if(NOT FLASHCL_NVCC)
  set(_flashcl_cuda_missing "nvcc not found (set FLASHCL_NVCC or CUDAToolkit_ROOT)")
else()
  get_filename_component(_nvcc_bin "${FLASHCL_NVCC}" DIRECTORY)
  find_path(FLASHCL_CUDA_INCLUDE_DIR cuda.h
    HINTS ${_nvcc_bin}/../include ${_nvcc_bin}/../targets/x86_64-linux/include
          ${_nvcc_bin}/../targets/sbsa-linux/include
    DOC "folder of the CUDA toolkit's cuda.h (driver API types)")
  execute_process(COMMAND "${FLASHCL_NVCC}" --version OUTPUT_VARIABLE _nvcc_out
                  RESULT_VARIABLE _nvcc_rc ERROR_QUIET)
  string(REGEX MATCH "release ([0-9]+)\\.([0-9]+)" _nvcc_release "${_nvcc_out}")
  set(_nvcc_major "${CMAKE_MATCH_1}")
  set(_nvcc_minor "${CMAKE_MATCH_2}")
  if(NOT _nvcc_rc EQUAL 0 OR _nvcc_major STREQUAL "")
    set(_flashcl_cuda_missing "${FLASHCL_NVCC} --version failed")
  elseif(_nvcc_major LESS 12)
    # sm_90a (Hopper's wgmma/TMA-capable target) needs CUDA 12.0.
    set(_flashcl_cuda_missing "nvcc ${_nvcc_major}.${_nvcc_minor} is too old (need 12.0+)")
  elseif(NOT FLASHCL_CUDA_INCLUDE_DIR)
    set(_flashcl_cuda_missing "cuda.h not found next to ${FLASHCL_NVCC}")
  endif()
endif()
if(_flashcl_cuda_missing)
  if(FLASHCL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FLASHCL_CUDA=ON but the CUDA backend cannot be built: "
                        "${_flashcl_cuda_missing}")
  endif()
  message(STATUS "flashcl: CUDA backend off: ${_flashcl_cuda_missing}")
  return()
endif()

# --- the fatbinary: one nvcc run over cuda/kernels.cu ----------------------------------------
set(_gencode)
foreach(arch ${FLASHCL_CUDA_ARCHS})
  # compute_90a for sm_90a: arch-specific features need the matching virtual architecture.
  list(APPEND _gencode "-gencode=arch=compute_${arch},code=sm_${arch}")
endforeach()
foreach(arch ${FLASHCL_CUDA_PTX})
  list(APPEND _gencode "-gencode=arch=compute_${arch},code=compute_${arch}")
endforeach()
if(NOT _gencode)
  message(FATAL_ERROR "FLASHCL_CUDA_ARCHS and FLASHCL_CUDA_PTX are both empty")
endif()

set(_nvcc_flags -std=c++17 -O3 --fatbin
    # Compress every image with the fatbinary's default codec, which all drivers that load
    # these architectures can decompress (~6x smaller library).
    -Xfatbin=-compress-all
    # Register spills and local memory are performance bugs in these kernels: show them.
    -Xptxas=-warn-spills,-warn-lmem-usage
    # The -gencode targets in parallel, a thread each up to the CPUs: the default five took
    # 161 s instead of 253 on a 2-core machine, with a byte-identical fatbinary (2026-11-27).
    --threads 0)
if(FLASHCL_WERROR)
  list(APPEND _nvcc_flags -Werror=all-warnings)
endif()
separate_arguments(_extra_nvcc_flags UNIX_COMMAND "${FLASHCL_NVCC_FLAGS}")

file(GLOB FLASHCL_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cu ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cuh
     ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.h)
set(FLASHCL_CUDA_FATBIN ${CMAKE_CURRENT_BINARY_DIR}/generated/flashcl_cuda.fatbin)
set(FLASHCL_CUDA_FATBIN_C ${CMAKE_CURRENT_BINARY_DIR}/generated/flashcl_cuda_fatbin.c)
add_custom_command(
  OUTPUT ${FLASHCL_CUDA_FATBIN}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/generated
  COMMAND "${FLASHCL_NVCC}" ${_nvcc_flags} ${_gencode} ${_extra_nvcc_flags}
          -o ${FLASHCL_CUDA_FATBIN} ${CMAKE_CURRENT_SOURCE_DIR}/cuda/kernels.cu
  DEPENDS ${FLASHCL_CUDA_KERNEL_SOURCES}
  COMMENT "Compiling the CUDA kernels (nvcc --fatbin: ${FLASHCL_CUDA_ARCHS}; PTX ${FLASHCL_CUDA_PTX})"
  VERBATIM)
add_custom_command(
  OUTPUT ${FLASHCL_CUDA_FATBIN_C}
  COMMAND ${CMAKE_COMMAND} -DINPUT=${FLASHCL_CUDA_FATBIN} -DOUTPUT=${FLASHCL_CUDA_FATBIN_C}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_fatbin.cmake
  DEPENDS ${FLASHCL_CUDA_FATBIN} ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_fatbin.cmake
  COMMENT "Embedding the CUDA fatbinary"
  VERBATIM)

# --- the backend's C sources ------------------------------------------------------------------
set(FLASHCL_CUDA_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/driver.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/context.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/kernels.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/softmax.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/softmax_plan.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/softmax_plan_held.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/split_state.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/attention.c)
target_sources(flashcl_objects PRIVATE ${FLASHCL_CUDA_SOURCES} ${FLASHCL_CUDA_FATBIN_C})
# cuda.h (types only) for these files alone, as a system header: the toolkit's include folder
# must not shadow anything the rest of the library includes.
set_source_files_properties(${FLASHCL_CUDA_SOURCES} PROPERTIES
  COMPILE_OPTIONS "-isystem;${FLASHCL_CUDA_INCLUDE_DIR}")
target_compile_definitions(flashcl_objects PRIVATE FLASHCL_HAVE_CUDA)

# dlopen/dlsym: libdl before glibc 2.34 (empty where libc has them). The libraries are built from
# flashcl_objects' object files, so they need the link themselves; they are defined after this
# file is included, hence the deferred call.
function(_flashcl_cuda_link_dl)
  foreach(t flashcl flashcl_static)
    if(TARGET ${t} AND CMAKE_DL_LIBS)
      target_link_libraries(${t} PUBLIC ${CMAKE_DL_LIBS})
    endif()
  endforeach()
endfunction()
cmake_language(DEFER CALL _flashcl_cuda_link_dl)

set(FLASHCL_HAVE_CUDA ON)
message(STATUS "flashcl: CUDA backend on (nvcc ${_nvcc_major}.${_nvcc_minor} at ${FLASHCL_NVCC}; "
               "sm ${FLASHCL_CUDA_ARCHS}; PTX ${FLASHCL_CUDA_PTX})")
