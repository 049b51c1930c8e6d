/* fc_parallel_for: a shared counter hands out job indices to the calling thread and to up to
 * FC_PARALLEL_MAX_THREADS - 1 helper threads, which exit when none is left. */
#include <threads.h>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "parallel.h"

typedef struct fc_pool {
    mtx_t lock;              /* guards next and stop */
    size_t next, n;
    int stop;                /* a job failed: start no more */
    int (*job)(void *arg, size_t i);
    void *arg;
} fc_pool;

/* The next job to run, or 0 when there is none (all taken, or a job failed). */
static int take(fc_pool *p, size_t *i) {
    int ok;
    mtx_lock(&p->lock);
    ok = !p->stop && p->next < p->n;
    if (ok) *i = p->next++;
    mtx_unlock(&p->lock);
    return ok;
}

static int work(void *opaque) {
    fc_pool *p = opaque;
    size_t i;
    while (take(p, &i))
        if (p->job(p->arg, i) != 0) {
            mtx_lock(&p->lock);
            p->stop = 1;
            mtx_unlock(&p->lock);
        }
    return 0;
}

unsigned fc_parallel_for(size_t n, unsigned threads, int (*job)(void *arg, size_t i), void *arg) {
    thrd_t helpers[FC_PARALLEL_MAX_THREADS];
    unsigned started = 0, k;
    fc_pool p;
    size_t i;

    if (threads > FC_PARALLEL_MAX_THREADS) threads = FC_PARALLEL_MAX_THREADS;
    if ((size_t)threads > n) threads = (unsigned)n;
    /* One thread (or no lock to share): the plain loop, on the caller. */
    if (threads <= 1 || mtx_init(&p.lock, mtx_plain) != thrd_success) {
        for (i = 0; i < n; i++)
            if (job(arg, i) != 0) break;
        return 1;
    }
    p.next = 0, p.n = n, p.stop = 0, p.job = job, p.arg = arg;
    for (k = 1; k < threads; k++) {
        if (thrd_create(&helpers[started], work, &p) != thrd_success) break;
        started++;
    }
    work(&p);
    for (k = 0; k < started; k++) thrd_join(helpers[k], NULL);
    mtx_destroy(&p.lock);
    return started + 1;
}

unsigned fc_cpu_count(void) {
#if defined(_SC_NPROCESSORS_ONLN)
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 0) return n > (long)FC_PARALLEL_MAX_THREADS ? FC_PARALLEL_MAX_THREADS : (unsigned)n;
#endif
    return 0;
}
