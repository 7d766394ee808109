# cmake --install: the h3 binary, libh3 (shared and static), the public headers, a CMake package (find_package(h3))
# and a pkg-config file, the Python binding. Everything is relocatable: `cmake --install build --prefix DIR` works
# for any DIR.
include(CMakePackageConfigHelpers)

set(H3_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/h3)
set(H3_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE PATH
  "where the Python binding (the h3 package) is installed, relative to the prefix")

install(TARGETS h3 RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS h3shared EXPORT h3SharedTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS h3lib EXPORT h3StaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/h3 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT h3SharedTargets NAMESPACE h3:: DESTINATION ${H3_CMAKE_INSTALL_DIR})
install(EXPORT h3StaticTargets NAMESPACE h3:: DESTINATION ${H3_CMAKE_INSTALL_DIR})

# The static library's dependencies, as its consumers find them again (h3Config.cmake's `static` component).
set(H3_PKG_CONFIG_MODULES "libpcre2-8 libutf8proc libavformat libavcodec libswscale libswresample libavutil sleef \
libjpeg libwebpdemux libwebp zlib cpp-httplib sqlite3")
set(H3_CUDA_PRIVATE_LIBS "")
if(H3_HAVE_CUDA)
  get_filename_component(H3_CUDNN_DIR ${CUDNN_LIBRARY} DIRECTORY)
  set(H3_CUDA_LIB_DIRS ${CUDAToolkit_LIBRARY_DIR} ${H3_CUDNN_DIR})
  list(REMOVE_DUPLICATES H3_CUDA_LIB_DIRS)
  list(TRANSFORM H3_CUDA_LIB_DIRS PREPEND "-L")
  list(JOIN H3_CUDA_LIB_DIRS " " H3_CUDA_LIB_DIRS)
  set(H3_CUDA_PRIVATE_LIBS "${H3_CUDA_LIB_DIRS} -lcudart -lcublas -lcublasLt -lcudnn")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/h3Config.cmake.in ${CMAKE_BINARY_DIR}/h3Config.cmake
  INSTALL_DESTINATION ${H3_CMAKE_INSTALL_DIR})
# Before 1.0 a minor version may break the API: only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/h3ConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/h3Config.cmake ${CMAKE_BINARY_DIR}/h3ConfigVersion.cmake
  DESTINATION ${H3_CMAKE_INSTALL_DIR})

# pkg-config: the prefix is found from the .pc file's own folder, so the file holds no absolute path of the prefix.
file(RELATIVE_PATH H3_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" H3_PC_TO_PREFIX "${H3_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/h3.pc.in ${CMAKE_BINARY_DIR}/h3.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/h3.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Python: the package, and where it finds libh3.so relative to itself.
file(RELATIVE_PATH H3_PY_TO_LIBDIR /prefix/${H3_PYTHON_INSTALL_DIR}/h3 /prefix/${CMAKE_INSTALL_LIBDIR})
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/python/h3/_location.py CONTENT
"# Written by cmake --install: where the installed libh3 is, relative to this package.
LIBRARY = \"${H3_PY_TO_LIBDIR}/$<TARGET_SONAME_FILE_NAME:h3shared>\"
")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/h3 DESTINATION ${H3_PYTHON_INSTALL_DIR}
  PATTERN __pycache__ EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/python/h3/_location.py DESTINATION ${H3_PYTHON_INSTALL_DIR}/h3)
