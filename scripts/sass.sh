#!/usr/bin/env bash
# The SASS of one kernel of an sm_90a object or cubin, on a machine without CUDA 13's cuobjdump (this container's
# toolkit has nvcc and ptxas only): Debian 12's nvdisasm (CUDA 11.8, package nvidia-cuda-toolkit in non-free, unpacked
# under /opt/cu118 without installing its dependencies) reads CUDA 13's cubins once the ELF header's ABI version and
# flags are written in its older form (sm_90, 64-bit, unified textures). It does not name wgmma (QGMMA/HGMMA are
# printed) but every other instruction; on the GPU machine `cuobjdump -sass` is the tool.
#
#   scripts/sass.sh FILE.cubin KERNEL_NAME_PART [OUT]    (a cubin: nvcc ... -cubin -arch=sm_90a -o FILE.cubin)
#   scripts/sass.sh --install                             (fetch and unpack the package, once)
set -euo pipefail
NVDISASM=/opt/cu118/usr/bin/nvdisasm
if [ "${1:-}" = --install ]; then
  src=/etc/apt/sources.list.d/debian.sources
  cp "$src" /tmp/debian.sources.orig
  sed -i 's/^Components: main$/Components: main contrib non-free/' "$src"
  apt-get update -q >/dev/null && (cd /tmp && apt-get download nvidia-cuda-toolkit)
  cp /tmp/debian.sources.orig "$src" && apt-get update -q >/dev/null
  dpkg -x /tmp/nvidia-cuda-toolkit_*.deb /opt/cu118
  exit 0
fi
[ $# -ge 2 ] || { echo "usage: $0 FILE.cubin KERNEL_NAME_PART [OUT] | --install" >&2; exit 2; }
[ -x "$NVDISASM" ] || { echo "$NVDISASM is missing: run $0 --install first" >&2; exit 2; }
patched=$(mktemp --suffix=.cubin)
trap 'rm -f "$patched"' EXIT
python3 - "$1" "$patched" <<'PY'
import struct, sys
elf = bytearray(open(sys.argv[1], 'rb').read())
elf[8] = 7                                    # EI_ABIVERSION of the CUDA 11 cubins
struct.pack_into('<I', elf, 48, 0x005a055a)   # e_flags: SM90 | 64-bit address | unified textures | virtual SM90
open(sys.argv[2], 'wb').write(elf)
PY
"$NVDISASM" -c "$patched" | awk -v k="$2" '/^\/\/-+ \.text\./ {p = index($0, k) > 0} p' > "${3:-/dev/stdout}"
