/* The one place that knows which backends were compiled in, in AUTO's order of preference. */
#include "backend.h"

extern const fc_backend fc_opencl_backend;
#ifdef FLASHCL_HAVE_CUDA
extern const fc_backend fc_cuda_backend;
#endif

static const fc_backend *const fc_backend_table[] = {
#ifdef FLASHCL_HAVE_CUDA
    &fc_cuda_backend,
#endif
    &fc_opencl_backend,
};

const fc_backend *const *fc_backends(size_t *count) {
    *count = sizeof fc_backend_table / sizeof fc_backend_table[0];
    return fc_backend_table;
}
