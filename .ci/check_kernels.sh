#!/usr/bin/env bash
# Checks the softmax kernels (cl/portability.h, cl/dtype.h, cl/softmax_exp.h, cl/softmax.cl,
# cl/softmax_kernels.cl, cl/softmax_cooperative.cl, cl/softmax_pipelined.cl, cl/softmax_ordered.cl,
# cl/softmax_rows_vector.cl) without a GPU:
#  1. compiles them with clang for AMD gfx90a, SPIR (spir64) and, when clang can, NVIDIA
#     (nvptx64-nvidia-nvcl), with every option set src/opencl/softmax.c can produce for such a
#     device, both as the library builds them (the program's files concatenated, -DFLASHCL_EMBEDDED)
#     and as a stand-alone file (cl/softmax_rows_vector.cl, which includes the others, -I cl);
#  2. runs the program given as $1 (one small case of every variant, e.g.
#     build/tests/test_softmax_oclgrind) under Oclgrind, with only Oclgrind's ICD visible:
#     once with --data-races --check-api on the optimised kernels, once with --uninitialized on
#     kernels built with -cl-opt-disable (Oclgrind 21.10's uninitialised-value plugin crashes on
#     the vector shuffles the optimiser emits). Any Oclgrind report fails the script.
# usage: .ci/check_kernels.sh [path/to/program [args...]]   (without a program: step 1 only)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# ---- 1. clang compiles -------------------------------------------------------------------------
CLANG=$(bash .ci/find_clang.sh) || exit 1
resource_include="$("$CLANG" -print-resource-dir)/include"
echo "== compiling the softmax kernels with $CLANG ($("$CLANG" --version | head -n1))"

cat cl/portability.h cl/dtype.h cl/softmax_exp.h cl/softmax.cl cl/softmax_kernels.cl cl/softmax_cooperative.cl cl/softmax_cooperative_bits.cl cl/softmax_pipelined.cl cl/softmax_ordered.cl cl/softmax_rows_vector.cl \
    > "$work/embedded.cl"

# job NAME MODE "clang target flags" "option set": compiles in the background; results are
# collected below. MODE embedded: the program's files concatenated with -DFLASHCL_EMBEDDED, as the
# library builds them; standalone: cl/softmax.cl alone with -I cl.
jobs_list=()
job() {
    local name=$1 mode=$2 target=$3 opts=$4 id=${#jobs_list[@]}
    local src="$work/embedded.cl" extra="-DFLASHCL_EMBEDDED"
    if [ "$mode" = standalone ]; then src=cl/softmax_rows_vector.cl; extra="-I cl"; fi
    jobs_list+=("$name|$mode|$opts")
    # shellcheck disable=SC2086
    ( "$CLANG" -x cl -cl-std=CL1.2 $target $extra $opts -Werror=implicit-function-declaration \
          "$src" -o "$work/out.$id" >"$work/log.$id" 2>&1; echo $? >"$work/rc.$id" ) &
    # at most as many compiles at once as there are processors
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
}

# The option sets softmax.c writes (fc_cl_softmax_options): one FC_SG_* mechanism, the
# work-group bound, FC_RIR_CHUNKS=4, FC_STREAM_UNROLL=4, FC_COOP=1 on NVIDIA/AMD GPUs with 64-bit
# atomics, FC_ORDERED=1 with them and on PoCL, FC_HALF_IMPL=2 and FC_STREAM_STORES=1 with
# NVIDIA PTX (FC_HALF_IMPL=1 elsewhere), FC_NV_CVT2=1 with NVIDIA PTX on sm_80+, -cl-std=CL2.0/CL3.0
# with cl_khr_subgroups, FC_ALIGNED_KERNELS=1 on GPUs (the aligned-rows twins). AMDGPU
# jobs run the whole backend (-c); the others stop at LLVM IR.
common="-DFC_SG_SIZE=32 -DFC_RIR_CHUNKS=4 -DFC_STREAM_UNROLL=4 -DFC_COOP_ELEMS=32 -DFC_HALF_IMPL=1"
AMD="-target amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -c"
AMD_IR="-target amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -S -emit-llvm"
SPIR="-target spir64 -S -emit-llvm"
INTEL="$SPIR -Xclang -cl-ext=+cl_intel_subgroups -cl-no-stdinc -Xclang -include -Xclang $resource_include/opencl-c.h"
job amdgcn embedded "$AMD" "-cl-std=CL2.0 -DFC_SG_KHR $common -DFC_MAX_WG=1024 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_PIPE_FLOATS=8192"
job amdgcn standalone "$AMD" "-cl-std=CL2.0 -DFC_SG_KHR $common -DFC_MAX_WG=1024 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_PIPE_FLOATS=8192"
job amdgcn embedded "$AMD" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_PIPE_FLOATS=8192"
job amdgcn embedded "$AMD" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=0"
# one input dtype per program, as the library builds them (FC_DTYPES, cl/dtype.h)
job amdgcn embedded "$AMD" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_DTYPES=2 -DFC_COOP_BITS=64"
job amdgcn standalone "$AMD" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_DTYPES=4"
job amdgcn embedded "$AMD_IR" "-cl-std=CL3.0 -DFC_SG_KHR $common -DFC_MAX_WG=256 -DFC_COOP=1 -DFC_ALIGNED_KERNELS=1 -DFC_ORDERED=1 -DFC_PIPE_FLOATS=8192"
job amdgcn embedded "$AMD_IR" "-DFC_SG_KHR $common -DFC_MAX_WG=1024 -DFC_COOP=0" # C 1.2: fallback
job amdgcn embedded "$AMD_IR" "-DFC_SG_INTEL $common -DFC_MAX_WG=1024 -DFC_COOP=0" # no ext: fallback
job spir64 embedded "$SPIR" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=0"
job spir64 standalone "$SPIR" "-DFC_SG_NONE $common -DFC_MAX_WG=256 -DFC_COOP=0 -DFC_ORDERED=1 -DFC_ROWS_VECTOR=1" # PoCL
job spir64 embedded "$SPIR" "-DFC_SG_NONE -DFC_SG_SIZE=32 -DFC_RIR_CHUNKS=4 -DFC_STREAM_UNROLL=4 -DFC_COOP_ELEMS=32 -DFC_HALF_IMPL=3 -DFC_MAX_WG=256 -DFC_COOP=0 -DFC_ORDERED=1 -DFC_ROWS_VECTOR=1 -DFC_DTYPES=2" # PoCL f16
job spir64 embedded "$SPIR" "-cl-std=CL2.0 -DFC_SG_KHR $common -DFC_MAX_WG=1024 -DFC_COOP=1 -DFC_ORDERED=1"
job spir64 embedded "$INTEL" "-DFC_SG_INTEL $common -DFC_MAX_WG=1024 -DFC_COOP=0"
# NVIDIA: inline PTX (shfl.sync, cvt). NVIDIA's driver has 64-bit atomics; clang must be told.
nv_out=""
nv_fast_out=""
nv_ftz_out=""
if "$CLANG" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -S -o /dev/null - </dev/null >/dev/null 2>&1; then
    NV="-target nvptx64-nvidia-nvcl -S -Xclang -cl-ext=+cl_khr_int64_base_atomics"
    nv_common="-DFC_SG_NV_PTX -DFC_SG_SIZE=32 -DFC_RIR_CHUNKS=4 -DFC_STREAM_UNROLL=4 -DFC_HALF_IMPL=2 -DFC_MAX_WG=1024 -DFC_STREAM_STORES=1 -DFC_ALIGNED_KERNELS=1"
    # FC_COOP_ELEMS: 32 in the f32 program, 64 in the 16-bit ones (softmax.c)
    nv_out="$work/out.${#jobs_list[@]}"
    job nvptx embedded "$NV" "$nv_common -DFC_COOP_ELEMS=32 -DFC_COOP=1 -DFC_ORDERED=1 -DFC_NV_CVT2=1 -DFC_PIPE_FLOATS=8192"
    job nvptx standalone "$NV" "$nv_common -DFC_COOP_ELEMS=32 -DFC_COOP=0"
    nv_fast_out="$work/out.${#jobs_list[@]}" # the 16-bit programs (FC_DTYPES 2 and 4)
    job nvptx embedded "$NV" "$nv_common -DFC_COOP_ELEMS=64 -DFC_COOP=1 -DFC_ORDERED=1 -DFC_NV_CVT2=1 -DFC_PIPE_FLOATS=8192 -DFC_FAST_EXP=1 -DFC_DTYPES=6"
    nv_ftz_out="$work/out.${#jobs_list[@]}" # and with the .ftz / shifted exps (the default there)
    job nvptx embedded "$NV" "$nv_common -DFC_COOP_ELEMS=64 -DFC_COOP=1 -DFC_ORDERED=1 -DFC_NV_CVT2=1 -DFC_PIPE_FLOATS=8192 -DFC_FAST_EXP=1 -DFC_EXP_FTZ=1 -DFC_EXP_SHIFT=1 -DFC_DTYPES=6 -DFC_COOP_BITS=64 -DFC_RESIDENT_PROBE=1"
else
    echo "  skip  nvptx: $CLANG has no nvptx64-nvidia-nvcl target"
fi
wait
for id in "${!jobs_list[@]}"; do
    IFS='|' read -r name mode opts <<<"${jobs_list[$id]}"
    if [ "$(cat "$work/rc.$id")" = 0 ]; then
        printf '  ok    %-7s %-10s %s\n' "$name" "$mode" "$opts"
    else
        printf '  FAIL  %-7s %-10s %s\n' "$name" "$mode" "$opts"
        sed 's/^/  | /' "$work/log.$id" | head -n 40
        failures=$((failures + 1))
    fi
done
if [ -n "$nv_out" ] && ! grep -q "shfl.sync.bfly.b32" "$nv_out"; then
    echo "  FAIL  nvptx: no shfl.sync.bfly in the PTX"; failures=$((failures + 1))
fi
if [ -n "$nv_out" ] && ! { grep -q "cvt.rn.f16x2.f32" "$nv_out" && grep -q "cvt.rn.bf16x2.f32" "$nv_out"; }; then
    echo "  FAIL  nvptx: no paired cvt.rn.f16x2/bf16x2 in the PTX (FC_NV_CVT2)"; failures=$((failures + 1))
fi
if [ -n "$nv_out" ] && ! grep -q "ex2.approx.f32 " "$nv_fast_out"; then
    echo "  FAIL  nvptx: no ex2.approx.f32 in the 16-bit PTX (FC_FAST_EXP)"; failures=$((failures + 1))
fi
if [ -n "$nv_out" ] && ! { grep -q "ex2.approx.ftz.f32 " "$nv_ftz_out" && grep -q "ex2.approx.f32 " "$nv_ftz_out"; }; then
    echo "  FAIL  nvptx: FC_EXP_FTZ=1 PTX lacks ex2.approx.ftz (or the f32-output ex2.approx)"; failures=$((failures + 1))
fi
if [ -n "$nv_out" ] && ! { grep -q "max.f16x2" "$nv_ftz_out" && grep -q "max.bf16x2" "$nv_ftz_out"; }; then
    echo "  FAIL  nvptx: FC_COOP_BITS=64 PTX lacks the packed max.f16x2 / max.bf16x2"; failures=$((failures + 1))
fi
# the residency probe (fc_resident_probe, the rows == 0 branch of every cooperative kernel in a
# program built with FC_RESIDENT_PROBE=1) is the kernels' only atom_cmpxchg (a call in clang's
# PTX, which has no OpenCL library): every cooperative and pipelined kernel of such a program must
# have one, and the programs built without it (the default) none
if [ -n "$nv_out" ] && grep -q "atom_cmpxchg" "$nv_fast_out"; then
    echo "  FAIL  nvptx: the residency probe in a program built without FC_RESIDENT_PROBE"
    failures=$((failures + 1))
fi
if [ -n "$nv_out" ]; then
    unprobed=$(awk '/^\.entry/ { if (coop && !cas) print name; name = $2; cas = 0;
                                  coop = name ~ /^softmax_split_row_(cooperative|pipelined)/ }
                    /atom_cmpxchg/ { cas = 1 }
                    END { if (coop && !cas) print name }' "$nv_ftz_out")
    probed=$(grep -c '^\.entry softmax_split_row_\(cooperative\|pipelined\)' "$nv_ftz_out" || true)
    if [ -n "$unprobed" ] || [ "$probed" -eq 0 ]; then
        echo "  FAIL  nvptx: cooperative kernels without the residency probe (${probed} found): $unprobed"
        failures=$((failures + 1))
    fi
fi
if [ -n "$nv_out" ] && ! grep -q "st.global.cs.v4.u32" "$nv_out"; then
    echo "  FAIL  nvptx: no st.global.cs in the PTX (FC_STREAM_STORES)"; failures=$((failures + 1))
fi

# ---- 2. Oclgrind ---------------------------------------------------------------------------------
if [ "$#" -gt 0 ]; then
    program=("$@")
    rt=""
    if command -v dpkg >/dev/null 2>&1; then
        rt=$(dpkg -L oclgrind 2>/dev/null | grep -E 'liboclgrind-rt-icd\.so$' | head -n1 || true)
    fi
    [ -n "$rt" ] || rt=$(ls /usr/lib/oclgrind/liboclgrind-rt-icd.so /usr/local/lib/liboclgrind-rt-icd.so 2>/dev/null | head -n1 || true)
    if [ -z "$rt" ]; then
        echo "check_kernels: Oclgrind's ICD library (liboclgrind-rt-icd.so) not found" >&2
        exit 1
    fi
    mkdir -p "$work/icd"
    echo "$rt" > "$work/icd/oclgrind.icd"
    # What Oclgrind says when it finds something (it exits 0 all the same).
    report='Invalid (read|write)|[Dd]ata race|[Uu]ninitiali[sz]ed|Oclgrind - |OCLGRIND FATAL|[Uu]ndefined|[Dd]ivergence|out of bounds|[Ee]rror detected'

    # run NAME ENV...: the program with only Oclgrind visible and a fresh kernel cache.
    run_oclgrind() {
        local name=$1; shift
        local log="$work/$name.log" rc=0
        echo "== Oclgrind ($name): ${program[*]}"
        env OCL_ICD_VENDORS="$work/icd" FLASHCL_CACHE_DIR="$(mktemp -d -p "$work")" \
            FLASHCL_TEST_CACHE_DIR="$(mktemp -d -p "$work")" "$@" "${program[@]}" >"$log" 2>&1 || rc=$?
        tail -n 5 "$log" | sed 's/^/  | /'
        if [ "$rc" -ne 0 ]; then
            echo "  FAIL  exit status $rc"; failures=$((failures + 1))
        fi
        if grep -Eq "$report" "$log"; then
            echo "  FAIL  Oclgrind reports:"; grep -E -m 20 "$report" "$log" | sed 's/^/  ! /'
            failures=$((failures + 1))
        else
            echo "  ok    no Oclgrind reports"
        fi
    }
    run_oclgrind races OCLGRIND_DATA_RACES=1 OCLGRIND_CHECK_API=1
    run_oclgrind uninitialized OCLGRIND_UNINITIALIZED=1 OCLGRIND_BUILD_OPTIONS=-cl-opt-disable
fi

if [ "$failures" -ne 0 ]; then
    echo "check_kernels: $failures failure(s)"
    exit 1
fi
echo "check_kernels: all good"
