#!/bin/bash
# One lent-GPU call for two experiments against the default plans (landed in session 44, what each
# is: bench/results/2026-12-07-session44.md, sections 3 and 4; run in session 46 on an H100:
# 2026-12-07-session46.md). From the repository root, through the device tool
# with carry [".device"]:
#     source .device/setup.sh; bash bench/device_pending_ab.sh
# About 400 s on an H100: an OpenCL-only build and its A/B run beside the CUDA build. Output under
# $OUT (summary on stdout). What to read:
#  - cuda-ab1.txt: the merged 16-bit kernel (FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2) against AUTO
#    (pipelined) on 8x8388608 and 16x4194304 f16/bf16;
#  - cuda-ab2.txt: AUTO against the merged kernel forced, on 4x12000000 and 4x16777216 f16 (733
#    and 1024 slices a row). Since session 46 AUTO gives the first the ring and the second the
#    merged kernel (ring_suits, src/cuda/softmax_plan.c), so only the first is an A/B;
#  - ocl-ab-*: the OpenCL residency probe (FLASHCL_SOFTMAX_COOP_PROBE=1) against the default plan,
#    with the trace's "resident N (probed; ...)" line (about 528 expected on an H100);
#  - test-resident.log, test-kernels.log, race.log: the two experiments' tests and racecheck.
set -u
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
T0=$SECONDS
st() { echo "== $1 at $((SECONDS-T0))s"; }
nvidia-smi --query-gpu=name --format=csv,noheader
export FLASHCL_CACHE_DIR=/tmp/flcache
opencl_chain() {
  cmake -S . -B /tmp/bo -DFLASHCL_CUDA=OFF -DFLASHCL_WERROR=ON > $OUT/bo-cmake.log 2>&1 &&
    cmake --build /tmp/bo -j6 --target flashcl-bench test_softmax_resident > $OUT/bo-build.log 2>&1 || { echo "opencl build failed"; tail -20 $OUT/bo-build.log; return; }
  echo "[ocl] built at $((SECONDS-T0))s"
  FLASHCL_BACKEND=opencl FLASHCL_SOFTMAX_COOP_PROBE=1 timeout 200 /tmp/bo/bench/flashcl-bench softmax -d nvidia -s 2x1048576 -t f16,bf16 --no-naive -r 1 -q > $OUT/ocl-warm.log 2>&1
  echo "[ocl] warm rc=$? at $((SECONDS-T0))s"
  for r in 1 2; do for e in X=0 FLASHCL_SOFTMAX_COOP_PROBE=1; do
    # file names without '=' (the device tool returns only plain names)
    name=default; [ "$e" = X=0 ] || name=probe
    env $e FLASHCL_BACKEND=opencl FLASHCL_SOFTMAX_TRACE=1 timeout 60 /tmp/bo/bench/flashcl-bench softmax -d nvidia -s 8x8388608,16x4194304,64x1048576 -t f16,bf16 --no-naive -r 9 > $OUT/ocl-ab-$r-$name.log 2>&1
    echo "[ocl] $e round $r rc=$? at $((SECONDS-T0))s"
  done; done
  FLASHCL_BACKEND=opencl FLASHCL_DEVICE=nvidia timeout 100 /tmp/bo/tests/test_softmax_resident > $OUT/test-resident.log 2>&1
  echo "[ocl] test_softmax_resident rc=$? at $((SECONDS-T0))s"
}
opencl_chain > $OUT/ocl-chain.txt 2>&1 &
OC=$!
st cuda-build
cmake -S . -B /tmp/bn -DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX= > $OUT/bn-cmake.log 2>&1 &&
  cmake --build /tmp/bn -j10 --target flashcl flashcl-bench test_cuda_softmax_kernels > $OUT/bn-build.log 2>&1 || { echo "cuda build failed"; tail -20 $OUT/bn-build.log; }
st cuda-ab-pipelined-vs-merged
for e in X=0 FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2 X=0 FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2; do
  echo "-- $e"; env $e timeout 50 python3 bench/compare_torch.py --lib /tmp/bn/libflashcl.so --shapes 8x8388608,16x4194304 --dtypes f16,bf16 2>&1 | grep -E "^(8x|16x)|rror"; done | tee $OUT/cuda-ab1.txt
st cuda-ab-ring-vs-merged
for e in X=0 FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2 X=0 FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2; do
  echo "-- $e"; env $e timeout 50 python3 bench/compare_torch.py --lib /tmp/bn/libflashcl.so --shapes 4x12000000,4x16777216 --dtypes f16 2>&1 | grep -E "^4x|rror"; done | tee $OUT/cuda-ab2.txt
FLASHCL_CUDA_SOFTMAX_TRACE=1 FLASHCL_BACKEND=cuda timeout 30 /tmp/bn/bench/flashcl-bench softmax -s 8x8388608,4x12000000,4x16777216 -t f16 -r 1 --no-naive -q > $OUT/cuda-trace.log 2>&1; grep -i "flashcl cuda" $OUT/cuda-trace.log | sort -u | head -6
st wait-opencl
wait $OC; cat $OUT/ocl-chain.txt
for f in $OUT/ocl-ab-*; do echo "-- $f"; grep -E "^ *[0-9]+x[0-9]+" $f | head -8; grep -i "resident" $f | sort -u | head -3; done
tail -5 $OUT/test-resident.log
st test-cuda-kernels
FLASHCL_BACKEND=cuda timeout 110 /tmp/bn/tests/cuda/test_cuda_softmax_kernels > $OUT/test-kernels.log 2>&1; echo "test_cuda_softmax_kernels rc=$?"; tail -6 $OUT/test-kernels.log
st racecheck
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
FLASHCL_BACKEND=cuda FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2 FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES=1 timeout 60 $cs --tool racecheck --error-exitcode 9 /tmp/bn/bench/flashcl-bench softmax -s 1x2097152,3x1048576 -t f16 -r 1 --no-naive -q > $OUT/race.log 2>&1; echo "racecheck rc=$?"; grep -E "SUMMARY" $OUT/race.log
st done
