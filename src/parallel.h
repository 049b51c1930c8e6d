/* Running independent jobs on a few threads (C11 <threads.h>): the OpenCL backend builds its
 * programs this way, since drivers compile one program per call and a context needs several. */
#ifndef FLASHCL_PARALLEL_H
#define FLASHCL_PARALLEL_H

#include <stddef.h>

/* More threads than this are never started (a sanity bound, far above any program count). */
#define FC_PARALLEL_MAX_THREADS 64

/* Runs job(arg, i) for every i in [0, n) on up to `threads` threads, the calling thread being
 * one of them, and returns once every started job has returned. Jobs start in index order.
 * When a job returns nonzero, jobs not started yet are skipped: with one thread this is a plain
 * loop that stops at the first failure. Threads that cannot be started leave their share to
 * the others, so every job runs (or is skipped) whatever the system allows. Returns how many
 * threads took part. */
unsigned fc_parallel_for(size_t n, unsigned threads, int (*job)(void *arg, size_t i), void *arg);

/* Processors online (sysconf where the system has it); 0 when unknown. */
unsigned fc_cpu_count(void);

#endif
