#!/usr/bin/env bash
# The SASS of one kernel of an sm_90a cubin, on a machine without CUDA 13's cuobjdump (this container's toolkit has
# nvcc and ptxas only): Debian 12's nvdisasm (CUDA 11.8, package nvidia-cuda-toolkit in non-free, unpacked under
# H3_CU118_DIR without installing its dependencies) reads CUDA 13's cubins once the ELF header's ABI version and flags
# are written in its older form (sm_90, 64-bit, unified textures). It does not name wgmma (QGMMA/HGMMA are left out)
# but prints every other instruction; on the GPU machine `cuobjdump -sass` is the tool.
#
#   scripts/sass.sh FILE.cubin [KERNEL_NAME_PART] [OUT]   (a cubin: nvcc ... -cubin -arch=sm_90a -o FILE.cubin;
#                                                          without a name part, every kernel)
#   scripts/sass.sh --install                             (fetch and unpack the package once; needs root for apt)
# H3_CU118_DIR: where the package is unpacked (default ~/.cache/h3/cu118). APT_SOURCES: the Debian sources file whose
# components get contrib and non-free for the download (default /etc/apt/sources.list.d/debian.sources; restored).
set -euo pipefail
CU118=${H3_CU118_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/h3/cu118}
NVDISASM=$CU118/usr/bin/nvdisasm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = --install ]; then
  sources=${APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
  cp "$sources" "$work/sources.orig"
  restore() { cp "$work/sources.orig" "$sources" && apt-get update -q >/dev/null; }
  sed -i 's/^Components: main$/Components: main contrib non-free/' "$sources"
  if ! (apt-get update -q >/dev/null && cd "$work" && apt-get download nvidia-cuda-toolkit); then
    restore
    echo "$0: could not download nvidia-cuda-toolkit from Debian's non-free component" >&2
    exit 1
  fi
  restore
  mkdir -p "$CU118"
  dpkg -x "$work"/nvidia-cuda-toolkit_*.deb "$CU118"
  echo "nvdisasm unpacked at $NVDISASM"
  exit 0
fi
[ $# -ge 1 ] || { echo "usage: $0 FILE.cubin [KERNEL_NAME_PART] [OUT] | --install" >&2; exit 2; }
[ -x "$NVDISASM" ] || { echo "$0: $NVDISASM is missing: run $0 --install first" >&2; exit 2; }
python3 - "$1" "$work/patched.cubin" <<'PY'
import struct, sys
elf = bytearray(open(sys.argv[1], 'rb').read())
elf[8] = 7                                    # EI_ABIVERSION of the CUDA 11 cubins
struct.pack_into('<I', elf, 48, 0x005a055a)   # e_flags: SM90 | 64-bit address | unified textures | virtual SM90
open(sys.argv[2], 'wb').write(elf)
PY
"$NVDISASM" -c "$work/patched.cubin" | awk -v k="${2:-}" '/^\/\/-+ \.text\./ {p = k == "" || index($0, k) > 0} p' \
  > "${3:-/dev/stdout}"
