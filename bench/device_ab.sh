#!/bin/bash
# One lent-GPU call that builds two trees of flashcl and compares them on the CUDA backend:
# test_cuda_interop and test_cuda_softmax_kernels on the new tree, then compare_torch.py
# alternating new and base, then (optionally) compute-sanitizer on flashcl-bench shapes.
# Everything is logged to $OUT/ab.txt (or ./ab.txt without $OUT); every step has a timeout, so a
# hung kernel costs that step only.
#
# The lent machine gets a copy of the working tree without .git, so the base tree travels as an
# untracked folder made beforehand (delete it before committing):
#     git archive main | (rm -rf abbase && mkdir abbase && tar -x -C abbase)
# then, through the device tool (carry [".device"]):
#     source .device/setup.sh; bash bench/device_ab.sh --base abbase \
#         --shapes 8x8388608,16x4194304 --rounds 2 --sanitize 2x8388608,3x1048576
#
# Options (all optional):
#   --base DIR        the base tree (default abbase); without it only the new tree is measured
#   --shapes LIST     compare_torch.py softmax shapes (default 8x8388608,16x4194304,64x1048576)
#   --dtypes LIST     compare_torch.py dtypes (default f32,f16,bf16)
#   --rounds N        alternations of new and base (default 2)
#   --env 'A=1 B=2'   environment for the new tree's runs only (an A/B switch)
#   --sanitize LIST   flashcl-bench shapes for memcheck and racecheck (f32,f16) on the new tree
#   --no-test         skip test_cuda_interop and test_cuda_softmax_kernels
#   --step-timeout S  seconds a step may take (default 120)
# Lessons it encodes: wait for the builds' own PIDs (a bare `wait` also waits for a tee'd
# process substitution and never returns); line-buffered Python; a timeout on every GPU step.
set -u
BASE=abbase SHAPES=8x8388608,16x4194304,64x1048576 DTYPES=f32,f16,bf16 ROUNDS=2
NEW_ENV="" SANITIZE="" RUN_TEST=1 STEP=120
while [ $# -gt 0 ]; do
    case "$1" in
    --base) BASE=$2; shift 2 ;;
    --shapes) SHAPES=$2; shift 2 ;;
    --dtypes) DTYPES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --env) NEW_ENV=$2; shift 2 ;;
    --sanitize) SANITIZE=$2; shift 2 ;;
    --no-test) RUN_TEST=0; shift ;;
    --step-timeout) STEP=$2; shift 2 ;;
    *) echo "device_ab.sh: unknown option '$1' (see the comment at the top)" >&2; exit 2 ;;
    esac
done
LOG=${OUT:-.}/ab.txt
exec > >(tee "$LOG") 2>&1
T0=$(date +%s)
elapsed() { echo "[t=$(($(date +%s) - T0))s] $*"; }
CF=(-DFLASHCL_WERROR=ON -DFLASHCL_CUDA_ARCHS=90a -DFLASHCL_CUDA_PTX=)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"

build() { # build SRC DIR JOBS TARGETS...
    local src=$1 dir=$2 jobs=$3
    shift 3
    { cmake -S "$src" -B "$dir" "${CF[@]}" && cmake --build "$dir" -j"$jobs" --target "$@"; } \
        >"$dir.log" 2>&1
    echo "build of $src: rc $? ($(grep -c 'spill' "$dir.log") lines about spills)"
}
build . /tmp/ab-new 10 flashcl test_cuda_interop test_cuda_softmax_kernels flashcl-bench &
P_NEW=$!
P_BASE=""
if [ -d "$BASE" ]; then
    build "$BASE" /tmp/ab-base 6 flashcl &
    P_BASE=$!
fi
wait $P_NEW $P_BASE
elapsed "built"

if [ $RUN_TEST = 1 ]; then
    for t in test_cuda_interop test_cuda_softmax_kernels; do
        echo "== FLASHCL_BACKEND=cuda $t (new)"
        # without --env: the tests set the switches they check themselves, and unset them after
        FLASHCL_BACKEND=cuda timeout "$STEP" /tmp/ab-new/tests/cuda/$t 2>&1 | tail -25
        echo "rc ${PIPESTATUS[0]} (124: timed out)"
        elapsed "$t"
    done
fi

for round in $(seq 1 "$ROUNDS"); do
    for side in new base; do
        [ $side = base ] && [ -z "$P_BASE" ] && continue
        echo "== $side, round $round"
        side_env=""
        [ $side = new ] && side_env=$NEW_ENV
        env $side_env timeout "$STEP" python3 -u -W ignore bench/compare_torch.py \
            --lib /tmp/ab-$side/libflashcl.so --shapes "$SHAPES" --dtypes "$DTYPES" --reps 15
        echo "rc $? (124: timed out)"
    done
done
elapsed "compared"

if [ -n "$SANITIZE" ]; then
    for tool in memcheck racecheck; do
        echo "== compute-sanitizer --tool $tool flashcl-bench softmax -s $SANITIZE (new)"
        env $NEW_ENV FLASHCL_BACKEND=cuda timeout "$STEP" compute-sanitizer --tool $tool \
            /tmp/ab-new/bench/flashcl-bench softmax -s "$SANITIZE" -t f32,f16 -r 1 --no-naive -q 2>&1 |
            grep -v '^ *$' | tail -14
        echo "rc ${PIPESTATUS[0]} (124: timed out)"
        elapsed "$tool"
    done
fi
