#!/usr/bin/env bash
# Installs the Debian packages h3 builds against (and python3, which the Python binding's tests run on), when any
# is missing. Safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git nlohmann-json3-dev libgtest-dev libpcre2-dev
      libutf8proc-dev libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev
      libedit-dev libsleef-dev libjpeg62-turbo-dev libwebp-dev zlib1g-dev ffmpeg clang libclang-rt-dev
      libcpp-httplib-dev libsqlite3-dev nodejs python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The server's client test (tests/server/) runs the openai npm package, pinned by its package-lock.json; npm comes
# with Node.js from NodeSource, and from Debian's npm package otherwise.
if ! command -v npm >/dev/null; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm >/dev/null
fi
server_tests="$(dirname "$0")/../tests/server"
installed="$server_tests/node_modules/.h3-installed-lock.json"  # the lock file the installed packages came from
if ! cmp -s "$server_tests/package-lock.json" "$installed"; then
  echo "setup: installing the server test's npm packages" >&2
  (cd "$server_tests" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$server_tests/package-lock.json" "$installed"
fi
