#!/usr/bin/env bash
# Prints the newest clang on PATH (clang-18 down to clang-15, then plain clang), or exits 1 with
# a message: the one search that check_kernels.sh and check_attention_kernels.sh share.
# Usage: CLANG=$(bash .ci/find_clang.sh) || exit 1
for c in clang-18 clang-17 clang-16 clang-15 clang; do
    if command -v "$c" >/dev/null 2>&1; then
        echo "$c"
        exit 0
    fi
done
echo "find_clang: no clang found (clang-18 .. clang-15 or clang)" >&2
exit 1
