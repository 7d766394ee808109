# The GPU architectures h3's CUDA code is compiled for (a fat binary: every NVIDIA GPU since Ampere).
#
# H3_CUDA_ARCHITECTURES (cache): CMake-style entries, each 80 or newer (compute capability 8.0, bf16 tensor cores);
# by default every one of 80, 86, 89, 90a, 100, 120 that this nvcc supports (`nvcc --list-gpu-arch`). Each entry
# becomes device code (SASS) for that architecture; H3_CUDA_PTX (on by default) adds PTX of the newest, which the
# driver compiles at load for a GPU newer than the list. For development on one GPU, one entry is enough and
# compiles several times faster: -DH3_CUDA_ARCHITECTURES=90a (an H100/H200) or 86, 89, ...
#
# Sets, for the caller:
#   H3_CUDA_TARGETS     the CUDA_ARCHITECTURES property of the portable code ("80-real;...;120-real;120-virtual")
#   H3_CUDA_HOPPER      whether 90a is listed (our sm_90a kernels, kernels_attention_sm90.cu, are compiled)
#   H3_CUDA_BUILD_ARCHS nvcc's names of what the build holds, comma-separated ("sm_80,...,sm_120,compute_120"):
#                       the device check (src/backend/cuda_arch.h) reads it
set(H3_CUDA_CANDIDATE_ARCHITECTURES 80 86 89 90a 100 120)
execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch OUTPUT_VARIABLE h3_nvcc_archs
  RESULT_VARIABLE h3_nvcc_rc ERROR_QUIET)
if(NOT h3_nvcc_rc EQUAL 0)
  message(FATAL_ERROR "${CMAKE_CUDA_COMPILER} --list-gpu-arch failed: set H3_CUDA_ARCHITECTURES by hand")
endif()
string(REGEX MATCHALL "compute_[0-9]+" h3_nvcc_archs "${h3_nvcc_archs}")
set(h3_default_archs "")
foreach(arch ${H3_CUDA_CANDIDATE_ARCHITECTURES})
  string(REGEX REPLACE "a$" "" number ${arch})
  if("compute_${number}" IN_LIST h3_nvcc_archs)
    list(APPEND h3_default_archs ${arch})
  endif()
endforeach()
set(H3_CUDA_ARCHITECTURES "${h3_default_archs}" CACHE STRING
  "GPU architectures of the CUDA code (80 or newer; e.g. 90a alone for development on an H100/H200)")
option(H3_CUDA_PTX "Also PTX of the newest of H3_CUDA_ARCHITECTURES, for GPUs newer than the list" ON)

set(H3_CUDA_TARGETS "")
set(H3_CUDA_BUILD_ARCHS "")
set(H3_CUDA_HOPPER OFF)
set(h3_newest 0)
foreach(arch ${H3_CUDA_ARCHITECTURES})
  if(NOT arch MATCHES "^([0-9]+)a?$" OR CMAKE_MATCH_1 LESS 80)
    message(FATAL_ERROR "H3_CUDA_ARCHITECTURES: '${arch}' is not an architecture of 80 or newer (e.g. 80, 86, "
                        "89, 90a, 100, 120): h3 needs compute capability 8.0 (bf16 tensor cores) or newer")
  endif()
  if(NOT "compute_${CMAKE_MATCH_1}" IN_LIST h3_nvcc_archs)
    message(FATAL_ERROR "H3_CUDA_ARCHITECTURES: ${CMAKE_CUDA_COMPILER} cannot compile for ${arch}")
  endif()
  if(CMAKE_MATCH_1 GREATER h3_newest)
    set(h3_newest ${CMAKE_MATCH_1})
  endif()
  if(arch STREQUAL "90a")
    set(H3_CUDA_HOPPER ON)
  endif()
  list(APPEND H3_CUDA_TARGETS ${arch}-real)
  list(APPEND H3_CUDA_BUILD_ARCHS sm_${arch})
endforeach()
if(NOT H3_CUDA_TARGETS)
  message(FATAL_ERROR "H3_CUDA_ARCHITECTURES is empty: name at least one architecture (e.g. 90a)")
endif()
if(H3_CUDA_PTX)
  list(APPEND H3_CUDA_TARGETS ${h3_newest}-virtual)
  list(APPEND H3_CUDA_BUILD_ARCHS compute_${h3_newest})
endif()
string(REPLACE ";" "," H3_CUDA_BUILD_ARCHS "${H3_CUDA_BUILD_ARCHS}")
message(STATUS "h3: CUDA code for ${H3_CUDA_BUILD_ARCHS}")
