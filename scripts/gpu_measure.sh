#!/usr/bin/env bash
# One call on the lent GPU machine: build, run the suite on NVIDIA OpenCL and on the CUDA
# backend, sanitizers, then the benches beside torch. Results go to the folder given.
# Usage (project root):
#   source .device/setup.sh; bash scripts/gpu_measure.sh "$OUT" [stage ...]
# Stages (default: all, in this order): build test-cuda test-opencl sanitize compare
#   bench-softmax torch-softmax bench-attention bench-cuda. Each stage has its own time limit
#   so that one hang cannot spend the whole call; its log is $OUT/<stage>.log.
set -uo pipefail
out=${1:-${OUT:-/tmp/flashcl-gpu}}
shift || true
stages=${*:-build test-cuda test-opencl sanitize compare bench-softmax torch-softmax bench-attention bench-cuda}
mkdir -p "$out"
bench=build-gpu/bench/flashcl-bench

stage() { # name seconds command...
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  echo "== $name (limit ${secs}s)"
  timeout --kill-after=5 "$secs" bash -c "$*" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc in $((SECONDS - t0))s"
  tail -n 25 "$out/$name.log"
  return $rc
}

build() {
  cmake -S . -B build-gpu -DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX= &&
    cmake --build build-gpu -j16 && $bench devices
}
test_cuda() { FLASHCL_BACKEND=cuda ctest --test-dir build-gpu --output-on-failure --timeout 120; }
test_opencl() {
  FLASHCL_BACKEND=opencl FLASHCL_DEVICE=nvidia FLASHCL_TEST_LARGE=${FLASHCL_TEST_LARGE:-1} \
    ctest --test-dir build-gpu --output-on-failure --timeout 200
}
sanitize() {
  local cs=compute-sanitizer
  command -v $cs > /dev/null || cs=/usr/local/cuda/bin/compute-sanitizer
  for tool in memcheck racecheck; do
    for t in test_cuda_interop test_cuda_softmax_kernels test_cuda_attention; do
      echo "-- $tool $t"
      $cs --tool $tool --report-api-errors no --error-exitcode 9 build-gpu/tests/cuda/$t > "$out/sanitize-$tool-$t.log" 2>&1
      echo "rc=$?"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|SKIP" "$out/sanitize-$tool-$t.log"
    done
  done
}
compare() {
  FLASHCL_LIB=build-gpu/libflashcl.so python3 bench/compare_torch.py --attention
  FLASHCL_LIB=build-gpu/libflashcl.so python3 bench/compare_torch.py --log --dtypes f32
}
bench_softmax() {
  FLASHCL_BACKEND=opencl $bench softmax --device nvidia --suite full --json "$out/flashcl_softmax.json"
}
torch_softmax() { python3 bench/torch_softmax.py --suite full --json "$out/torch_softmax.json"; }
bench_attention() {
  FLASHCL_BACKEND=opencl $bench attention --device nvidia --suite full \
    --json "$out/flashcl_attention.json"
}
bench_cuda() {
  FLASHCL_BACKEND=cuda $bench softmax --suite full --json "$out/cuda_softmax.json" &&
    FLASHCL_BACKEND=cuda $bench attention --suite full --no-baseline --json "$out/cuda_attention.json"
}

export out bench
export -f build test_cuda test_opencl sanitize compare bench_softmax torch_softmax \
  bench_attention bench_cuda
for s in $stages; do
  case $s in
  build) stage build 300 build || { echo "build failed"; exit 1; } ;;
  test-cuda) stage test-cuda 400 test_cuda ;;
  test-opencl) stage test-opencl 500 test_opencl ;;
  sanitize) stage sanitize 300 sanitize ;;
  compare) stage compare 300 compare ;;
  bench-softmax) stage bench-softmax 300 bench_softmax ;;
  torch-softmax) stage torch-softmax 200 torch_softmax ;;
  bench-attention) stage bench-attention 400 bench_attention ;;
  bench-cuda) stage bench-cuda 400 bench_cuda ;;
  *) echo "unknown stage $s"; exit 2 ;;
  esac
done
