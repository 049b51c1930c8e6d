#!/bin/bash
# Session 20 call 11: the final main on the H200 -- full ctest on NVIDIA OpenCL (FLASHCL_DEVICE=nvidia) without the Oclgrind runs.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
cmake -S . -B build-new -DFLASHCL_CUDA=OFF -DFLASHCL_WERROR=ON -DFLASHCL_BUILD_TESTS=ON -DFLASHCL_BUILD_BENCH=ON >/tmp/cfg.log 2>&1 && cmake --build build-new -j16 >/tmp/build.log 2>&1; echo "build rc=$?"
export FLASHCL_CACHE_DIR=/tmp/fc
FLASHCL_BACKEND=opencl build-new/bench/flashcl-bench softmax -d nvidia -s 64x64 -t f16 --no-naive -r 1 -q 2>&1 | grep -m1 "context create"
FLASHCL_BACKEND=opencl FLASHCL_DEVICE=nvidia timeout 500 ctest --test-dir build-new -E oclgrind -j3 2>&1 | grep -E "Test +#|tests passed|Skipped|Failed" | tee $OUT/ctest.txt
