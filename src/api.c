/* The public API: every argument is validated here, once, before anything is enqueued; the
 * backend receives descriptors already known to be valid. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "handles.h"
#include "text.h"
#include "validate.h"

/* ---- devices ---------------------------------------------------------------------------- */

/* One entry of the global device list: which backend, and its index within that backend. */
typedef struct fc_device_slot {
    const fc_backend *backend;
    int local_index;
    flashcl_device_info info;
} fc_device_slot;

/* Lists every device of every backend, in registry order. *out is malloc'ed. */
static flashcl_status gather_devices(fc_device_slot **out, size_t *count) {
    size_t nbackends, b, total = 0;
    const fc_backend *const *backends = fc_backends(&nbackends);
    fc_device_slot *slots = NULL;
    *out = NULL;
    *count = 0;
    for (b = 0; b < nbackends; b++) {
        size_t n = 0, i;
        flashcl_device_info *infos;
        fc_device_slot *grown;
        flashcl_status st = backends[b]->list_devices(NULL, 0, &n);
        if (st != FLASHCL_SUCCESS || n == 0) continue; /* a broken backend hides no others */
        infos = calloc(n, sizeof *infos);
        grown = realloc(slots, (total + n) * sizeof *slots);
        if (!infos || !grown) {
            free(infos);
            free(grown ? grown : slots);
            return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory listing devices");
        }
        slots = grown;
        {
            size_t got = 0;
            st = backends[b]->list_devices(infos, n, &got);
            if (st != FLASHCL_SUCCESS) got = 0;
            if (got > n) got = n; /* a device appeared between the two calls */
            for (i = 0; i < got; i++) {
                slots[total + i].backend = backends[b];
                slots[total + i].local_index = (int)i;
                slots[total + i].info = infos[i];
            }
            total += got;
        }
        free(infos);
    }
    *out = slots;
    *count = total;
    return FLASHCL_SUCCESS;
}

flashcl_status flashcl_list_devices(flashcl_device_info *out, size_t capacity, size_t *count) {
    fc_device_slot *slots;
    size_t n, i;
    flashcl_status st;
    fc_clear_error();
    if (!count) return fc_fail(FLASHCL_INVALID_ARGUMENT, "count is NULL");
    if (capacity > 0 && !out)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL but capacity is %zu", capacity);
    st = gather_devices(&slots, &n);
    if (st != FLASHCL_SUCCESS) return st;
    for (i = 0; i < n && i < capacity; i++) out[i] = slots[i].info;
    *count = n;
    free(slots);
    return FLASHCL_SUCCESS;
}

static const char *backend_name(flashcl_backend b) {
    return b == FLASHCL_BACKEND_CUDA ? "cuda" : b == FLASHCL_BACKEND_OPENCL ? "opencl" : "auto";
}

/* Applies FLASHCL_BACKEND and FLASHCL_DEVICE over the caller's options. */
static flashcl_status apply_environment(flashcl_context_options *o, char *match_buf,
                                        size_t match_size) {
    const char *env = getenv("FLASHCL_BACKEND");
    if (env && env[0]) {
        if (!strcmp(env, "opencl") || !strcmp(env, "OPENCL"))
            o->backend = FLASHCL_BACKEND_OPENCL;
        else if (!strcmp(env, "cuda") || !strcmp(env, "CUDA"))
            o->backend = FLASHCL_BACKEND_CUDA;
        else if (!strcmp(env, "auto") || !strcmp(env, "AUTO"))
            o->backend = FLASHCL_BACKEND_AUTO;
        else
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "environment FLASHCL_BACKEND='%s' is not one of opencl, cuda, auto",
                           env);
    }
    env = getenv("FLASHCL_DEVICE");
    if (env && env[0]) {
        char *end;
        long index;
        errno = 0;
        index = strtol(env, &end, 10);
        if (*end == '\0' && errno == 0 && index >= 0 && index <= 1000000) {
            o->device_index = (int)index;
            o->device_match = NULL;
        } else {
            snprintf(match_buf, match_size, "%s", env);
            o->device_index = -1;
            o->device_match = match_buf;
        }
    }
    return FLASHCL_SUCCESS;
}

/* Whether a device of this slot may be chosen. Under AUTO every backend may: the registry lists
 * CUDA devices first, so searches take an NVIDIA GPU with a working driver through CUDA, and
 * FLASHCL_BACKEND=opencl (opts.backend) reaches its OpenCL twin. */
static int backend_allowed(flashcl_backend wanted, const fc_device_slot *slot) {
    return wanted == FLASHCL_BACKEND_AUTO || slot->backend->kind == wanted;
}

/* Picks the device: an explicit index, else the first name match, else the best one (the first
 * GPU, else the first device). Returns -1 and sets the error. */
static long choose_device(const fc_device_slot *slots, size_t n,
                          const flashcl_context_options *o, flashcl_status *st) {
    size_t i;
    *st = FLASHCL_DEVICE_NOT_FOUND;
    if (n == 0) {
        fc_fail(*st, "no device found: no OpenCL platform reports a device%s",
                " (is an ICD such as pocl-opencl-icd installed?)");
        return -1;
    }
    if (o->device_index >= 0) {
        if ((size_t)o->device_index >= n) {
            fc_fail(*st, "device_index %d does not exist: %zu device(s) found", o->device_index,
                    n);
            return -1;
        }
        if (!backend_allowed(o->backend, &slots[o->device_index])) {
            *st = FLASHCL_INVALID_ARGUMENT;
            fc_fail(*st, "device %d ('%s') is not a %s device", o->device_index,
                    slots[o->device_index].info.name, backend_name(o->backend));
            return -1;
        }
        return o->device_index;
    }
    if (o->device_match) {
        for (i = 0; i < n; i++)
            if (backend_allowed(o->backend, &slots[i]) &&
                fc_contains_nocase(slots[i].info.name, o->device_match))
                return (long)i;
        {
            /* Name what there is, so that a typo or the wrong backend shows at once. */
            char names[512] = "";
            size_t used = 0;
            for (i = 0; i < n && used < sizeof names; i++)
                if (backend_allowed(o->backend, &slots[i]))
                    used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'",
                                             used ? ", " : "", slots[i].info.name);
            fc_fail(*st, "no %s%sdevice name contains '%s' (devices: %s)",
                    o->backend == FLASHCL_BACKEND_AUTO ? "" : backend_name(o->backend),
                    o->backend == FLASHCL_BACKEND_AUTO ? "" : " ", o->device_match,
                    used ? names : "none");
        }
        return -1;
    }
    for (i = 0; i < n; i++)
        if (backend_allowed(o->backend, &slots[i]) && (slots[i].info.features & FLASHCL_FEATURE_GPU))
            return (long)i;
    for (i = 0; i < n; i++)
        if (backend_allowed(o->backend, &slots[i])) return (long)i;
    fc_fail(*st, "no %s device found", backend_name(o->backend));
    return -1;
}

flashcl_status fc_context_wrap(const fc_backend *backend, void *impl, flashcl_context **out) {
    flashcl_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx || mtx_init(&ctx->lock, mtx_plain) != thrd_success) {
        free(ctx);
        backend->context_destroy(impl);
        return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory creating a context");
    }
    ctx->backend = backend;
    ctx->impl = impl;
    *out = ctx;
    return FLASHCL_SUCCESS;
}

flashcl_status flashcl_context_create(const flashcl_context_options *opts,
                                      flashcl_context **out) {
    flashcl_context_options o = {FLASHCL_BACKEND_AUTO, -1, NULL, NULL};
    char match_buf[256];
    fc_device_slot *slots;
    size_t n;
    long chosen;
    void *impl = NULL;
    flashcl_status st;

    fc_clear_error();
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    if (opts) o = *opts;
    if (o.backend != FLASHCL_BACKEND_AUTO && o.backend != FLASHCL_BACKEND_OPENCL &&
        o.backend != FLASHCL_BACKEND_CUDA)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "opts->backend %d is not a flashcl_backend",
                       (int)o.backend);
    if (o.device_index < -1)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "opts->device_index %d: use -1 for the best "
                       "device or an index from flashcl_list_devices", o.device_index);
    st = apply_environment(&o, match_buf, sizeof match_buf);
    if (st != FLASHCL_SUCCESS) return st;
    st = gather_devices(&slots, &n);
    if (st != FLASHCL_SUCCESS) return st;
    chosen = choose_device(slots, n, &o, &st);
    if (chosen < 0) {
        free(slots);
        return st;
    }
    st = slots[chosen].backend->context_create(slots[chosen].local_index, o.cache_dir, &impl);
    if (st == FLASHCL_SUCCESS) st = fc_context_wrap(slots[chosen].backend, impl, out);
    free(slots);
    return st;
}

void flashcl_context_destroy(flashcl_context *ctx) {
    flashcl_buffer *b, *next;
    if (!ctx) return;
    ctx->backend->finish(ctx->impl);
    for (b = ctx->buffers; b; b = next) {
        next = b->next;
        ctx->backend->buffer_release(ctx->impl, b->mem);
        free(b);
    }
    ctx->backend->context_destroy(ctx->impl);
    mtx_destroy(&ctx->lock);
    free(ctx);
}

flashcl_status flashcl_context_device(const flashcl_context *ctx, flashcl_device_info *out) {
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    return ctx->backend->context_device(ctx->impl, out);
}

flashcl_status flashcl_context_build_info(const flashcl_context *ctx, int *from_cache,
                                          double *seconds) {
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    ctx->backend->build_info(ctx->impl, from_cache, seconds);
    return FLASHCL_SUCCESS;
}

flashcl_status flashcl_finish(flashcl_context *ctx) {
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    return ctx->backend->finish(ctx->impl);
}

/* ---- buffers ---------------------------------------------------------------------------- */

flashcl_status fc_buffer_register(flashcl_context *ctx, void *mem, size_t size,
                                  flashcl_buffer **out) {
    flashcl_buffer *b = calloc(1, sizeof *b);
    if (!b) {
        ctx->backend->buffer_release(ctx->impl, mem);
        return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory creating a buffer");
    }
    b->ctx = ctx;
    b->mem = mem;
    b->size = size;
    mtx_lock(&ctx->lock);
    b->next = ctx->buffers;
    if (ctx->buffers) ctx->buffers->prev = b;
    ctx->buffers = b;
    mtx_unlock(&ctx->lock);
    *out = b;
    return FLASHCL_SUCCESS;
}

flashcl_status flashcl_buffer_create(flashcl_context *ctx, size_t bytes, flashcl_buffer **out) {
    void *mem = NULL;
    flashcl_status st;
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    if (bytes == 0) return fc_fail(FLASHCL_INVALID_ARGUMENT, "bytes is 0");
    st = ctx->backend->buffer_create(ctx->impl, bytes, &mem);
    if (st != FLASHCL_SUCCESS) return st;
    return fc_buffer_register(ctx, mem, bytes, out);
}

void flashcl_buffer_destroy(flashcl_buffer *buf) {
    flashcl_context *ctx;
    if (!buf) return;
    ctx = buf->ctx;
    mtx_lock(&ctx->lock);
    if (buf->prev) buf->prev->next = buf->next;
    else ctx->buffers = buf->next;
    if (buf->next) buf->next->prev = buf->prev;
    mtx_unlock(&ctx->lock);
    ctx->backend->buffer_release(ctx->impl, buf->mem);
    free(buf);
}

size_t flashcl_buffer_size(const flashcl_buffer *buf) { return buf ? buf->size : 0; }

static flashcl_status check_range(const flashcl_buffer *buf, size_t offset, const void *host,
                                  size_t bytes, const char *host_name) {
    if (!buf) return fc_fail(FLASHCL_INVALID_ARGUMENT, "buf is NULL");
    if (!host) return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s is NULL", host_name);
    if (bytes == 0) return fc_fail(FLASHCL_INVALID_ARGUMENT, "bytes is 0");
    if (offset > buf->size || bytes > buf->size - offset)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "range [%zu, %zu + %zu) extends past the buffer's %zu bytes", offset,
                       offset, bytes, buf->size);
    return FLASHCL_SUCCESS;
}

flashcl_status flashcl_buffer_write(flashcl_buffer *buf, size_t offset, const void *src,
                                    size_t bytes) {
    flashcl_status st;
    fc_clear_error();
    st = check_range(buf, offset, src, bytes, "src");
    if (st != FLASHCL_SUCCESS) return st;
    return buf->ctx->backend->buffer_write(buf->ctx->impl, buf->mem, offset, src, bytes);
}

flashcl_status flashcl_buffer_read(const flashcl_buffer *buf, size_t offset, void *dst,
                                   size_t bytes) {
    flashcl_status st;
    fc_clear_error();
    st = check_range(buf, offset, dst, bytes, "dst");
    if (st != FLASHCL_SUCCESS) return st;
    return buf->ctx->backend->buffer_read(buf->ctx->impl, buf->mem, offset, dst, bytes);
}

/* ---- operations ------------------------------------------------------------------------- */

flashcl_status flashcl_softmax(flashcl_context *ctx, const flashcl_softmax_params *params,
                               const flashcl_tensor *x, const flashcl_tensor *y) {
    fc_softmax_desc d;
    fc_view vx, vy;
    flashcl_status st;
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    st = fc_validate_view(ctx, x, "x", 2, &vx);
    if (st != FLASHCL_SUCCESS) return st;
    st = fc_validate_view(ctx, y, "y", 2, &vy);
    if (st != FLASHCL_SUCCESS) return st;
    if (x->shape[0] != y->shape[0] || x->shape[1] != y->shape[1])
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "x shape [%lld, %lld] differs from y shape [%lld, %lld]",
                       (long long)x->shape[0], (long long)x->shape[1], (long long)y->shape[0],
                       (long long)y->shape[1]);
    memset(&d, 0, sizeof d);
    d.in_place = fc_same_view(x, y);
    if (!d.in_place && fc_views_overlap(&vx, &vy))
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "x and y overlap in buffer memory without being the same view "
                       "(in place needs equal offset, dtype and strides)");
    d.scale = 1.0f;
    if (params) {
        if (!isfinite(params->scale))
            return fc_fail(FLASHCL_INVALID_ARGUMENT, "params->scale is %g; it must be finite",
                           (double)params->scale);
        if (params->scale != 0.0f) d.scale = params->scale;
        if ((int)params->variant < FLASHCL_SOFTMAX_AUTO ||
            (int)params->variant > FLASHCL_SOFTMAX_SPLIT_ROW)
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "params->variant %d is not a flashcl_softmax_variant",
                           (int)params->variant);
        d.log = params->log != 0;
        d.variant = params->variant;
    }
    d.x_mem = x->buffer->mem;
    d.y_mem = y->buffer->mem;
    d.x_offset = x->offset;
    d.y_offset = y->offset;
    d.x_dtype = x->dtype;
    d.y_dtype = y->dtype;
    d.rows = x->shape[0];
    d.cols = x->shape[1];
    d.x_row_stride = x->strides[0];
    d.y_row_stride = y->strides[0];
    return ctx->backend->softmax(ctx->impl, &d);
}
