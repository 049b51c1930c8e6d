#!/usr/bin/env bash
# Registers and spills of the OpenCL attention kernels as NVIDIA would build them, without a GPU:
# clang compiles cl/attention.cl for nvptx64 with libclc's builtins linked in, and CUDA's ptxas
# assembles the PTX for sm_90a with -v. NVIDIA's OpenCL compiler is a different front end, so
# the counts differ (session 29: 254 here against NVIDIA's 248 for the f32 D128 key-parallel
# decode kernel, but 144 against 104 for its cp.async form). Use it to compare variants of a
# kernel before spending device time, then confirm on the device (-cl-nv-verbose). Needs clang-15 (or newer: set CLANG), libclc-15 (its
# nvptx64--nvidiacl.bc; set LIBCLC) and ptxas (CUDA toolkit; set PTXAS).
# Usage (project root): bash scripts/ptx_registers.sh [-D options of cl/ ...]
#   e.g. bash scripts/ptx_registers.sh -DFC_DTYPES=1 -DFC_ATTN_KINDS=4 -DFC_ATTN_ASYNC=1
set -euo pipefail
CLANG=${CLANG:-clang-15}
LIBCLC=${LIBCLC:-/usr/lib/clc/nvptx64--nvidiacl.bc}
PTXAS=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
for tool in "$CLANG" "$PTXAS" "$LIBCLC"; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -e "$tool" ]; then
    echo "ptx_registers: $tool not found (see the header of this script)" >&2
    exit 1
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# sm_86 is the newest CPU clang-15 knows; ptxas then assembles the same PTX for sm_90a.
"$CLANG" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -S -O2 -I cl \
  -Xclang -mlink-builtin-bitcode -Xclang "$LIBCLC" -Xclang -target-cpu -Xclang sm_86 \
  -Xclang -target-feature -Xclang +ptx75 -Wno-linker-warnings \
  -DFC_SG_NV_PTX -DFC_HALF_IMPL=2 -DFC_ATTN_SPLIT_WG=128 -DFC_ATTN_MAX_SPLITS=256 "$@" \
  cl/attention.cl -o "$work/attention.ptx"
"$PTXAS" -arch=sm_90a -v "$work/attention.ptx" -o "$work/attention.cubin" 2>&1 |
  awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
       /bytes spill stores/ { spill = $5 }
       /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") regs = $(i + 1);
                                 printf "%-40s %4s registers, %s bytes spilled\n", name, regs, spill }'
