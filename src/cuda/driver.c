/* Loads the CUDA driver library at run time (see driver.h for why). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "driver.h"
#include "../error.h"

static fc_cu_api fc_cu_table;
static const fc_cu_api *fc_cu_loaded; /* &fc_cu_table once everything resolved and cuInit passed */
static char fc_cu_reason[512];
static once_flag fc_cu_once = ONCE_FLAG_INIT;

/* dlsym returns void *; ISO C has no conversion to a function pointer, POSIX guarantees it
 * works. Copying the bits keeps -Wpedantic quiet. */
static int resolve(void *library, const char *symbol, void *slot, size_t slot_size) {
    void *address = dlsym(library, symbol);
    if (!address) return 0;
    memcpy(slot, &address, slot_size);
    return 1;
}

static void load_driver(void) {
    const char *path = getenv("FLASHCL_CUDA_DRIVER");
    void *library;
    CUresult result;
    if (!path || !path[0]) path = "libcuda.so.1";
    /* RTLD_LOCAL: the driver's symbols stay out of the global namespace, so a process that links
     * libcuda itself (PyTorch) is unaffected; dlopen of an already-loaded library just returns
     * it. The handle is never closed: the driver lives as long as the process. */
    library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(fc_cu_reason, sizeof fc_cu_reason, "cannot load the CUDA driver (%s): %s", path,
                 why ? why : "dlopen failed");
        return;
    }
#define FC_CU_RESOLVE_(member, symbol, params)                                                 \
    if (!resolve(library, symbol, &fc_cu_table.member, sizeof fc_cu_table.member)) {           \
        snprintf(fc_cu_reason, sizeof fc_cu_reason,                                            \
                 "the CUDA driver (%s) lacks %s: it is too old for flashcl", path, symbol);    \
        return;                                                                                \
    }
    FC_CU_REQUIRED(FC_CU_RESOLVE_)
#undef FC_CU_RESOLVE_
#define FC_CU_RESOLVE_OPTIONAL_(member, symbol, params)                                        \
    if (!resolve(library, symbol, &fc_cu_table.member, sizeof fc_cu_table.member))             \
        fc_cu_table.member = NULL;
    FC_CU_OPTIONAL(FC_CU_RESOLVE_OPTIONAL_)
#undef FC_CU_RESOLVE_OPTIONAL_
    result = fc_cu_table.Init(0);
    if (result != CUDA_SUCCESS) {
        const char *name = NULL;
        if (fc_cu_table.GetErrorName(result, &name) != CUDA_SUCCESS || !name) name = "?";
        snprintf(fc_cu_reason, sizeof fc_cu_reason, "cuInit failed: %s (%d)", name, (int)result);
        return;
    }
    fc_cu_loaded = &fc_cu_table;
}

const fc_cu_api *fc_cu(void) {
    call_once(&fc_cu_once, load_driver);
    return fc_cu_loaded;
}

const char *fc_cu_unavailable_reason(void) {
    call_once(&fc_cu_once, load_driver);
    return fc_cu_loaded ? "" : fc_cu_reason;
}

const char *fc_cu_error_name(CUresult result) {
    const char *name = NULL;
    if (!fc_cu_loaded || fc_cu_loaded->GetErrorName(result, &name) != CUDA_SUCCESS || !name)
        return "CUDA_ERROR_UNKNOWN_CODE";
    return name;
}

flashcl_status fc_cu_fail(CUresult result, const char *call) {
    flashcl_status status =
        result == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR;
    return fc_fail(status, "%s failed: %s (%d)", call, fc_cu_error_name(result), (int)result);
}
