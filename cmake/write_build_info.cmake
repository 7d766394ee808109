# Run at every build (cmake -P): writes OUT, the header src/util/build_info.cpp reads, with the version, the commit
# of the checkout at SOURCE_DIR ("-dirty" when tracked files differ from it; "unknown" outside a git checkout) and
# the CUDA architectures; the file is rewritten only when its text changes, so an unchanged commit rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DOUT=... -DVERSION=... -DCUDA_ARCHITECTURES=... -P write_build_info.cmake
set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --short=12 HEAD
    OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE head_rc ERROR_QUIET)
  if(head_rc EQUAL 0 AND head)
    set(commit ${head})
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} status --porcelain --untracked-files=no
      OUTPUT_VARIABLE changes RESULT_VARIABLE status_rc ERROR_QUIET)
    if(status_rc EQUAL 0 AND changes)
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()
set(text "// Written by cmake/write_build_info.cmake at build time.\n#pragma once\n#define H3_BUILD_VERSION \"${VERSION}\"\n#define H3_BUILD_COMMIT \"${commit}\"\n#define H3_BUILD_CUDA_ARCHITECTURES \"${CUDA_ARCHITECTURES}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
