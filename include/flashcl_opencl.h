/* flashcl OpenCL interop: run flashcl on a caller's OpenCL objects, or reach flashcl's. */
#ifndef FLASHCL_OPENCL_H
#define FLASHCL_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "flashcl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adopts a caller's context, device and in-order queue: flashcl retains them (and releases its
 * references in flashcl_context_destroy), compiles its kernels for the device and enqueues all
 * work on `queue`, so it orders naturally with the caller's own commands. The device must
 * belong to the context and the queue to both. Out-of-order queues are rejected. */
FLASHCL_API flashcl_status flashcl_context_create_from_cl(cl_context context, cl_device_id device,
                                                          cl_command_queue queue,
                                                          flashcl_context **out);

/* Wraps a caller's cl_mem (created in the context's cl_context) as a flashcl buffer without
 * copying. flashcl retains the cl_mem; flashcl_buffer_destroy releases that reference only. */
FLASHCL_API flashcl_status flashcl_buffer_wrap_cl(flashcl_context *ctx, cl_mem mem,
                                                  flashcl_buffer **out);

/* The cl_mem behind a buffer of an OpenCL context (not retained), or NULL. */
FLASHCL_API cl_mem flashcl_buffer_cl_mem(const flashcl_buffer *buf);

/* The OpenCL objects of an OpenCL context (not retained), so a caller can enqueue its own work
 * in order with flashcl's. Any of the out pointers may be NULL. FLASHCL_UNSUPPORTED for a
 * context of another backend. */
FLASHCL_API flashcl_status flashcl_context_cl_objects(const flashcl_context *ctx,
                                                      cl_context *context, cl_device_id *device,
                                                      cl_command_queue *queue);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_OPENCL_H */
