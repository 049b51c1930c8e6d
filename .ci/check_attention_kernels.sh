#!/usr/bin/env bash
# Compiles the attention programs without a GPU: cl/attention.cl for AMD gfx90a and SPIR (the
# GPU tiles, the CPUs' generic kernels, and program parts as the library builds them), and the
# tensor-core program and the f32 cp.async decode kernels for nvptx64 (inline PTX operands, and
# register arrays kept out of local memory). Each compile is one clang process on one core, so
# .ci/run runs this beside check_kernels.sh. Exits non-zero on the first failure.
# Usage: bash .ci/check_attention_kernels.sh   (from anywhere; works in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The newest clang for every compile below, as check_kernels.sh takes it.
clang=$(bash .ci/find_clang.sh)

echo "== attention kernels for AMD gfx90a and SPIR (GPU tiles, generic CPU kernels, program parts)"
# The last four are parts as the library builds them: one dtype's prefill and key-parallel
# kernels, the merge kernels alone, the tiled decode kernels alone, and the CPUs' generic program
# with their own kernels (cl/attention_cpu.cl), so that those are held to another compiler too.
for defs in "" "-DFC_ATTN_GENERIC" "-DFC_SG_KHR -cl-std=CL2.0" "-DFC_DTYPES=2 -DFC_ATTN_KINDS=5" \
    "-DFC_DTYPES=0 -DFC_ATTN_KINDS=8" "-DFC_ATTN_GENERIC -DFC_ATTN_KINDS=2" \
    "-DFC_ATTN_GENERIC -DFC_ATTN_CPU=1"; do
  # shellcheck disable=SC2086
  "$clang" -x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -Werror \
    -I cl $defs -c cl/attention.cl -o /dev/null
  echo "ok    attention.cl for gfx90a ${defs:-(GPU defaults)}"
done
# Intel GPUs get the GPU program with local-memory reductions (FC_SG_NONE, as every device but
# NVIDIA's); CPUs the generic program with their own kernels. clang's spir64 target checks the
# OpenCL C for them (to LLVM IR: there is no Intel backend here).
for defs in "-DFC_SG_NONE" "-DFC_SG_NONE -DFC_ATTN_GENERIC -DFC_ATTN_CPU=1"; do
  # shellcheck disable=SC2086
  "$clang" -x cl -cl-std=CL2.0 -target spir64 -S -emit-llvm -Werror -I cl $defs \
    -c cl/attention.cl -o /dev/null
  echo "ok    attention.cl for spir64 $defs"
done

echo "== tensor-core attention program (NVIDIA inline PTX) for nvptx64"
# Built by the library only for NVIDIA GPUs; here clang checks the OpenCL C and the asm
# operands, and that the register arrays stay in registers (no local-memory stack frame).
cat cl/ptx_async.h cl/attention_common.cl cl/attention_mma.cl cl/attention_mma_tf32x3.cl \
  > "$work/attention_mma.cl"
for warps in 4 8; do
  "$clang" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -S -O2 -Werror \
    -DFLASHCL_EMBEDDED -DFC_SG_NV_PTX -DFC_MMA_WARPS=$warps "$work/attention_mma.cl" \
    -o "$work/attention_mma.ptx"
  test "$(grep -c 'mma.sync.aligned.m16n8k16' "$work/attention_mma.ptx")" -gt 0
  test "$(grep -c 'mma.sync.aligned.m16n8k8.row.col.f32.tf32' "$work/attention_mma.ptx")" -gt 0
  if grep -q '__local_depot' "$work/attention_mma.ptx"; then
    echo "FAIL  attention_mma.cl: register arrays went to local memory (warps $warps)"; exit 1
  fi
  echo "ok    attention_mma.cl for nvptx64 (FC_MMA_WARPS=$warps)"
done
# The f32 program as NVIDIA sm80+ builds it: with the cp.async form of the decode kernel
# (every kernel on; the library's default leaves the four-row one and D256 out).
"$clang" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -S -O2 -Werror -I cl -DFC_SG_NV_PTX \
  -DFC_HALF_IMPL=2 -DFC_DTYPES=1 -DFC_ATTN_KINDS=5 -DFC_ATTN_ASYNC=1 '-DFC_ATTN_A4_64=(64,4,16,2)' \
  '-DFC_ATTN_A4_128=(64,4,16,2)' '-DFC_ATTN_A256=(64,8,8,2)' cl/attention.cl \
  -o "$work/attention_f32.ptx"
test "$(grep -c 'cp.async.cg.shared.global' "$work/attention_f32.ptx")" -gt 0
test "$(grep -c '^.entry fc_attn_decode_async' "$work/attention_f32.ptx")" -eq 5
echo "ok    attention.cl f32 with the cp.async decode kernels for nvptx64"
echo "check_attention_kernels: all good"
