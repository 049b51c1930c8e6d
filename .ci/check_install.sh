#!/usr/bin/env bash
# Builds a tiny downstream program against an installed flashcl, once through CMake's
# find_package(flashcl) and once through pkg-config, and runs it.
set -euo pipefail
prefix=$1
work=$(mktemp -d)
cat > "$work/app.c" <<'C'
#include <stdio.h>
#include <flashcl.h>
int main(void) {
    size_t n = 0;
    if (flashcl_list_devices(NULL, 0, &n) != FLASHCL_SUCCESS) {
        fprintf(stderr, "list failed: %s\n", flashcl_last_error());
        return 1;
    }
    printf("downstream app sees %zu device(s); status 0 is '%s'\n", n,
           flashcl_status_string(FLASHCL_SUCCESS));
    return 0;
}
C
cat > "$work/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(flashcl REQUIRED)
add_executable(app app.c)
target_link_libraries(app flashcl::flashcl)
CM
cmake -S "$work" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/build/app"

pcdir=$(dirname "$(find "$prefix" -name flashcl.pc | head -1)")
# shellcheck disable=SC2046
cc -o "$work/app-pc" "$work/app.c" $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs flashcl)
LD_LIBRARY_PATH="$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir flashcl)" "$work/app-pc"
echo "install check: find_package and pkg-config consumers built and ran"
