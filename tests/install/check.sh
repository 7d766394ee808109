#!/usr/bin/env bash
# The installed h3, as an integrator uses it (ctest runs one step per test; `setup` first, as their fixture):
#   check.sh setup     BUILD WORK SRC   cmake --install BUILD into WORK/prefix; the tiny model in WORK/tiny
#   check.sh headers   BUILD WORK SRC   every public header compiles alone against the prefix (C++20; h3_c.h also
#                                       as C99); the installed package files name no path of the build or the checkout
#   check.sh pkg-config BUILD WORK SRC  the C and C++ examples built with pkg-config, run on the tiny model; ffprobe
#                                       shows the settings in the MP4's metadata
#   check.sh cmake     BUILD WORK SRC   the same built with CMake (find_package(h3)): C on h3::h3, C++ on h3::h3_static
#   check.sh python    BUILD WORK SRC   the Python binding: the example, then tests/install/test_python.py (with
#                                       the installed bin/h3, whose sentences the binding's errors must match)
# PYTHON (default /usr/bin/python3, what scripts/setup.sh installs) runs the Python steps.
set -euo pipefail
step=$1 build=$(realpath "$2") work=$(realpath -m "$3") src=$(realpath "$4")
prefix=$work/prefix tiny=$work/tiny
python=${PYTHON:-/usr/bin/python3}
# The small request every run makes (one video VAE chunk, two passes).
small=(64 64 5 2)

fail() {
  echo "check.sh $step: $*" >&2
  exit 1
}

case $step in
setup)
  rm -rf "$work"
  mkdir -p "$work"
  cmake --install "$build" --prefix "$prefix" >/dev/null
  "$prefix/bin/h3" tool make-tiny-model "$tiny" >/dev/null
  ;;
headers)
  cd "$work"
  for h in "$prefix"/include/h3/*.h; do
    # Only h3/ headers and the standard library's: nothing from src/.
    if grep -E '^#include "' "$h" | grep -vE '^#include "h3/[a-z_0-9]+\.h"'; then fail "$h includes a private header"; fi
    printf '#include <h3/%s>\n' "$(basename "$h")" | c++ -std=c++20 -Wall -Wextra -Werror -fsyntax-only \
      -I"$prefix/include" -x c++ - || fail "$(basename "$h") does not compile alone against the prefix"
  done
  printf '#include <h3/h3_c.h>\n' | cc -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" \
    -x c - || fail "h3_c.h is not C99"
  if grep -rlE "H3_SOURCE_DIR|$src|$build" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then
    fail "an installed package file names the build's or the checkout's path"
  fi
  ;;
pkg-config)
  cd "$work"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  libdir=$(pkg-config --variable=libdir h3)
  # shellcheck disable=SC2046
  cc -std=c99 -Wall -Wextra -Werror -o c_pkg_config "$src/examples/c/generate.c" $(pkg-config --cflags --libs h3) \
    -Wl,-rpath,"$libdir"
  # shellcheck disable=SC2046
  c++ -std=c++20 -Wall -Wextra -Werror -o cpp_pkg_config "$src/examples/cpp/generate.cpp" \
    $(pkg-config --cflags --libs h3) -Wl,-rpath,"$libdir"
  ./c_pkg_config "$tiny" c.mp4 "A red fox; a \"quoted\" ünïcode prompt" "${small[@]}" 1234567890123 2>/dev/null \
    | grep -q "wrote c.mp4: 64x64, 5 frames (5 seen as they were decoded)" || fail "the C example"
  ./cpp_pkg_config "$tiny" cpp.mp4 "A red fox" "${small[@]}" 2>/dev/null \
    | grep -q "wrote cpp.mp4: 64x64, 5 frames; a second video with seed 43: prompt cached yes" || fail "the C++ example"
  tags=$(ffprobe -v error -show_entries format_tags -of default=noprint_wrappers=1 c.mp4)
  for want in 'TAG:h3_prompt=A red fox; a "quoted" ünïcode prompt' 'TAG:h3_seed=1234567890123' 'TAG:h3_passes=2' \
    'TAG:h3_canvas=64x64' 'TAG:h3_frames=5' 'TAG:h3_workflow=t2va' 'TAG:description=A red fox; a "quoted" ünïcode prompt'; do
    grep -qxF "$want" <<<"$tags" || fail "ffprobe does not show '$want' in c.mp4's tags: $tags"
  done
  grep -qE '^TAG:h3_version=[0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-z-]+\)$' <<<"$tags" || fail "no h3_version: $tags"
  ;;
cmake)
  cmake -S "$src/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" >/dev/null
  cmake --build "$work/examples" >/dev/null
  cd "$work"
  "$work/examples/h3_c_example" "$tiny" c_cmake.mp4 "A red fox" "${small[@]}" 2>/dev/null \
    | grep -q "wrote c_cmake.mp4: 64x64, 5 frames" || fail "the C example (CMake, shared)"
  "$work/examples/h3_cpp_example" "$tiny" cpp_cmake.mp4 "A red fox" "${small[@]}" 2>/dev/null \
    | grep -q "wrote cpp_cmake.mp4: 64x64, 5 frames" || fail "the C++ example (CMake, static)"
  ldd "$work/examples/h3_c_example" | grep -q "libh3.so" || fail "h3::h3 is not the shared libh3"
  if ldd "$work/examples/h3_cpp_example" | grep -q "libh3"; then fail "h3::h3_static linked a shared libh3"; fi
  ;;
python)
  cd "$work"
  export PYTHONPATH=$prefix/lib/python3/dist-packages
  "$python" "$src/examples/python/generate.py" "$tiny" py.mp4 "A red fox" "${small[@]}" 2>/dev/null \
    | grep -q "wrote py.mp4: 64x64, 5 frames (5 seen as they were decoded)" || fail "the Python example"
  ffprobe -v error -show_entries format_tags=h3_seed -of default=noprint_wrappers=1 py.mp4 | grep -qx "TAG:h3_seed=7" \
    || fail "py.mp4 does not carry its seed"
  "$python" "$src/tests/install/test_python.py" "$tiny" "$prefix/bin/h3"
  ;;
*)
  fail "unknown step (setup, headers, pkg-config, cmake, python)"
  ;;
esac
