/* `flashcl-bench devices`, and the small naming helpers every report uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *bench_dtype_name(flashcl_dtype dtype)
{
    switch (dtype) {
    case FLASHCL_F32: return "f32";
    case FLASHCL_F16: return "f16";
    case FLASHCL_BF16: return "bf16";
    }
    return "?";
}

/* The names the --variant option takes. */
const char *bench_variant_name(flashcl_softmax_variant variant)
{
    switch (variant) {
    case FLASHCL_SOFTMAX_AUTO: return "auto";
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS: return "rows";
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED: return "chunked";
    case FLASHCL_SOFTMAX_SPLIT_ROW: return "split";
    }
    return "?";
}

const char *bench_backend_name(flashcl_backend backend)
{
    switch (backend) {
    case FLASHCL_BACKEND_AUTO: return "auto";
    case FLASHCL_BACKEND_OPENCL: return "opencl";
    case FLASHCL_BACKEND_CUDA: return "cuda";
    }
    return "?";
}

void bench_feature_words(unsigned features, char *out, size_t size)
{
    static const struct {
        unsigned bit;
        const char *word;
    } words[] = {
        {FLASHCL_FEATURE_GPU, "gpu"},
        {FLASHCL_FEATURE_SUBGROUPS, "subgroups"},
        {FLASHCL_FEATURE_MATRIX_UNITS, "matrix-units"},
        {FLASHCL_FEATURE_FP16_ARITH, "fp16-arith"},
    };
    unsigned known = 0;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        known |= words[i].bit;
        if (features & words[i].bit)
            used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s%s",
                                     used ? " " : "", words[i].word);
    }
    /* Bits added to the library after this tool was written still show, as hex. */
    if ((features & ~known) && used < size)
        used += (size_t)snprintf(out + used, size - used, "%s0x%x", used ? " " : "",
                                 features & ~known);
    if (used == 0)
        snprintf(out, size, "none");
}

void bench_format_bytes(double bytes, char *out, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0 || bytes >= 100.0 || bytes == (double)(long long)bytes)
        snprintf(out, size, "%.0f %s", bytes, units[u]);
    else
        snprintf(out, size, "%.1f %s", bytes, units[u]);
}

int bench_cmd_devices(void)
{
    size_t count = 0;
    flashcl_status st = flashcl_list_devices(NULL, 0, &count);
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl-bench: listing devices failed: %s: %s\n",
                flashcl_status_string(st), flashcl_last_error());
        return BENCH_EXIT_FAIL;
    }
    if (count == 0) {
        printf("no devices (no OpenCL platform with a usable device was found)\n");
        return BENCH_EXIT_OK;
    }
    flashcl_device_info *infos = calloc(count, sizeof *infos);
    if (!infos) {
        fprintf(stderr, "flashcl-bench: out of host memory\n");
        return BENCH_EXIT_FAIL;
    }
    size_t filled = 0;
    st = flashcl_list_devices(infos, count, &filled);
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl-bench: listing devices failed: %s: %s\n",
                flashcl_status_string(st), flashcl_last_error());
        free(infos);
        return BENCH_EXIT_FAIL;
    }
    if (filled < count) /* a device vanished between the two calls */
        count = filled;
    for (size_t i = 0; i < count; i++) {
        const flashcl_device_info *d = &infos[i];
        char global[32], local[32], feats[128], sg[16];
        bench_format_bytes((double)d->global_mem_bytes, global, sizeof global);
        bench_format_bytes((double)d->local_mem_bytes, local, sizeof local);
        bench_feature_words(d->features, feats, sizeof feats);
        if (d->subgroup_size > 0)
            snprintf(sg, sizeof sg, "%d", d->subgroup_size);
        else
            snprintf(sg, sizeof sg, "none");
        printf("[%zu] %s  (%s)\n", i, d->name, bench_backend_name(d->backend));
        printf("    vendor: %s\n    platform: %s\n    driver: %s\n", d->vendor, d->platform,
               d->driver);
        printf("    compute units: %d   global memory: %s   local memory: %s   "
               "sub-group size: %s\n",
               d->compute_units, global, local, sg);
        printf("    features: %s\n", feats);
    }
    free(infos);
    return BENCH_EXIT_OK;
}
