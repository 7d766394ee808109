#!/usr/bin/env bash
# Installs the Debian packages h3 builds against, when any is missing. Safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git nlohmann-json3-dev libgtest-dev libpcre2-dev
      libutf8proc-dev libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev
      libedit-dev libsleef-dev libjpeg62-turbo-dev libwebp-dev zlib1g-dev ffmpeg clang libclang-rt-dev)
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
