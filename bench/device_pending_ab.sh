#!/bin/bash
# One lent-GPU call for what session 48 left to measure (bench/results/2026-12-07-session48.md).
# From the repository root, through the device tool with carry [".device"]:
#     source .device/setup.sh; bash bench/device_pending_ab.sh
# About 250 s on an H100 (CUDA build for sm_90a ~100 s). Everything goes to $OUT/pending.log as
# it runs (a call cut by its time limit keeps what was done). What to read:
#  - the softmax suite through compare_torch.py, every dtype, at main's plans: #4's table
#    (session 48 measured 8x8388608 f32 alone: 82.3 % of copy on an H100; no H200 since
#    session 33);
#  - the merged f32 kernel's stall prefetch at 264 / 330 (the default) / 396 / 462 tickets
#    ahead on rows of 916..1050 slices, two rounds (stall_prefetch_ahead, src/cuda/softmax_plan.c);
#  - the deep blocks past the ring on 16-bit rows (2x22000000, 977 deep slices) against no
#    split-held kernel, and 4x11000000 f32 through compare_torch (values against torch).
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/pending.log") 2>&1
T0=$SECONDS
st() { echo "== $1 at $((SECONDS-T0))s"; }
nvidia-smi --query-gpu=name --format=csv,noheader
cmake -S . -B /tmp/bp -DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX= \
  > "$OUT/cmake.log" 2>&1 &&
  cmake --build /tmp/bp -j16 --target flashcl flashcl-bench > "$OUT/build.log" 2>&1 ||
  { echo "build failed"; tail -20 "$OUT/build.log"; exit 1; }
st built
timeout 150 python3 bench/compare_torch.py --lib /tmp/bp/libflashcl.so --reps 9 2>&1 |
  grep -vE "^\s*$"
st suite
B=/tmp/bp/bench/flashcl-bench
S=4x7500000,4x8000000,8x8388608,4x8600000
for r in 1 2; do for n in 264 330 396 462; do
  printf -- "-- r%s ahead %-4s " $r $n
  FLASHCL_BACKEND=cuda FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH=$n timeout 40 $B softmax -s $S -t f32 \
    -r 9 --no-naive -q 2>&1 | grep -E "^ *[0-9]+x" | awk '{printf "%s %s  ", $1, $4}'
  echo
done; done
st prefetch
for e in X=1 FLASHCL_CUDA_SOFTMAX_DEEP=0; do
  printf -- "-- %s " $e
  env $e FLASHCL_BACKEND=cuda timeout 40 $B softmax -s 2x22000000 -t f16,bf16 -r 9 --no-naive \
    -q 2>&1 | grep -E "^ *[0-9]+x" | awk '{printf "%s %s %s  ", $1, $2, $4}'
  echo
done
timeout 60 python3 bench/compare_torch.py --lib /tmp/bp/libflashcl.so --shapes 4x11000000,2x22000000 \
  --dtypes f32,f16 --reps 9 2>&1 | grep -vE "^\s*$" | tail -6
st done
