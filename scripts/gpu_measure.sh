#!/usr/bin/env bash
# One call on the lent GPU machine: build, run the suite on NVIDIA OpenCL and on the CUDA
# backend, then the softmax bench beside torch. Results go to the folder given (default $OUT).
# Usage (project root):  source .device/setup.sh; bash scripts/gpu_measure.sh "$OUT"
set -uo pipefail
out=${1:-${OUT:-/tmp/flashcl-gpu}}
mkdir -p "$out"
cmake -S . -B build-gpu -DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX= \
  > "$out/build.log" 2>&1 && cmake --build build-gpu -j16 >> "$out/build.log" 2>&1 \
  || { tail -50 "$out/build.log"; exit 1; }
build-gpu/bench/flashcl-bench devices | tee "$out/devices.txt"
FLASHCL_BACKEND=opencl FLASHCL_DEVICE=nvidia FLASHCL_TEST_LARGE=1 \
  ctest --test-dir build-gpu --output-on-failure > "$out/ctest_opencl.log" 2>&1
tail -5 "$out/ctest_opencl.log"
FLASHCL_BACKEND=cuda ctest --test-dir build-gpu --output-on-failure \
  > "$out/ctest_cuda.log" 2>&1
tail -5 "$out/ctest_cuda.log"
FLASHCL_BACKEND=opencl build-gpu/bench/flashcl-bench softmax --device nvidia --suite full \
  --json "$out/flashcl_softmax.json" | tee "$out/flashcl_softmax.txt"
python3 bench/torch_softmax.py --suite full --json "$out/torch_softmax.json" \
  | tee "$out/torch_softmax.txt"
FLASHCL_BACKEND=opencl build-gpu/bench/flashcl-bench attention --device nvidia --suite full \
  --json "$out/flashcl_attention.json" | tee "$out/flashcl_attention.txt"
