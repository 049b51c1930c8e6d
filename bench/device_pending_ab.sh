#!/bin/bash
# One lent-GPU call for what session 49 left to check (bench/results/2026-12-07-session49.md).
# From the repository root, through the device tool with carry [".device"]:
#     source .device/setup.sh; bash bench/device_pending_ab.sh
# About 420 s on an H100 (the build for sm_90a ~170 s on a cold machine). Everything goes to
# $OUT/pending.log as it runs (a call cut by its time limit keeps what was done). What to read:
#  - the whole test suite on the CUDA backend (last run in session 44), with
#    test_cuda_softmax_kernels' new shape 1x9000000 f32 (AUTO's merged kernel in deep blocks,
#    against host_ref), and the split-held plans moved to src/cuda/softmax_plan_held.c (a move,
#    no change meant: the suite's plans and times should be session 49's);
#  - the softmax suite through compare_torch.py, every dtype: #4's table. Session 49 had it on
#    an H100 (8x8388608 f32 84.0 %, f16 88.4 %, bf16 90.5 %, every other cell >= 93.6 %); no
#    H200 has run it since session 33, so run this there when one comes;
#  - bench/probes/merged_row_end_trace on 8x8388608 and 16x4194304 f32: where the merged
#    kernel's time goes at each row's end (its README says how to read it).
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/pending.log") 2>&1
T0=$SECONDS
st() { echo "== $1 at $((SECONDS-T0))s"; }
nvidia-smi --query-gpu=name --format=csv,noheader
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I cuda -I src -I include \
  -o /tmp/row_end_trace bench/probes/merged_row_end_trace/trace.cu > "$OUT/trace_build.log" 2>&1 &
cmake -S . -B /tmp/bp -DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX= \
  > "$OUT/cmake.log" 2>&1 &&
  cmake --build /tmp/bp -j16 > "$OUT/build.log" 2>&1 ||
  { echo "build failed"; tail -20 "$OUT/build.log"; exit 1; }
st built
FLASHCL_BACKEND=cuda timeout 200 ctest --test-dir /tmp/bp -E oclgrind -j4 --timeout 190 \
  > "$OUT/ctest.log" 2>&1
echo "ctest rc $?"
grep -E "tests passed|Failed|\*\*\*|Skipped|Not Run" "$OUT/ctest.log" | head -20
st test
timeout 150 python3 bench/compare_torch.py --lib /tmp/bp/libflashcl.so --reps 9 2>&1 |
  grep -vE "^\s*$"
st suite
wait
timeout 60 /tmp/row_end_trace 8 8388608
timeout 60 /tmp/row_end_trace 16 4194304
st done
