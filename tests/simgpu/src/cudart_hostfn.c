/* cudart_hostfn.c - mock CUDA runtime: host functions and stream callbacks (cudaLaunchHostFunc,
 * cudaStreamAddCallback).
 *
 * As in CUDA, a host function runs on a runtime thread (one per process here, so functions of
 * independent streams may be serialised, which CUDA allows) once everything queued on its stream
 * before it is done, and work queued on the stream after it waits until it returns. On the device
 * timeline that is a marker for "the work before" and a deferred marker resolved when the function
 * returns. Host functions are no GPU work: they appear neither in the ground truth nor in CUPTI
 * activity records. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cudart_internal.h"

typedef struct host_item {
    sg_op *before; /* marker behind the work queued before the function */
    sg_op *hold;   /* holds the stream's later work until the function returned */
    cudaHostFn_t fn;
    cudaStreamCallback_t callback; /* a stream callback: callback(stream, status, arg) */
    cudaStream_t stream;
    void *arg;
    struct host_item *next;
} host_item;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond; /* CLOCK_MONOTONIC, set up with the thread */
static host_item *g_head;
static pid_t g_thread_pid; /* process the callback thread runs in (0: none; a fork child starts its own) */

static void run_item(host_item *it)
{
    if (it->callback)
        it->callback(it->stream, cudaSuccess, it->arg);
    else
        it->fn(it->arg);
    sg_op_resolve(it->hold, sg_now_ns());
    sg_op_release(it->hold);
    sg_op_release(it->before);
    free(it);
}

/* Runs each queued function whose predecessors are done, in the order they became ready. */
static void *callback_thread(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&g_lock);
    for (;;) {
        host_item *ready = NULL;
        uint64_t now = sg_now_ns(), wake = now + 1000000;
        for (host_item **p = &g_head; *p; p = &(*p)->next) {
            uint64_t end = 0;
            if (sg_op_done((*p)->before, &end)) {
                ready = *p;
                *p = ready->next;
                break;
            }
            if (end && end < wake) wake = end;
        }
        if (ready) {
            pthread_mutex_unlock(&g_lock);
            run_item(ready);
            pthread_mutex_lock(&g_lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t wait = wake > now ? wake - now : 0;
        ts.tv_sec += (time_t)(wait / 1000000000u);
        ts.tv_nsec += (long)(wait % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g_cond, &g_lock, &ts);
    }
    return NULL;
}

static pthread_condattr_t g_cond_attr;
static void init_cond(void)
{
    pthread_condattr_init(&g_cond_attr);
    pthread_condattr_setclock(&g_cond_attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &g_cond_attr);
}

/* Starts the callback thread in this process (g_lock held); signals stay with the program's threads. */
static void ensure_thread_locked(void)
{
    pid_t pid = getpid();
    if (g_thread_pid == pid) return;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_cond);
    if (g_thread_pid) g_head = NULL; /* fork child: the parent's queued work is gone */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, callback_thread, NULL) == 0) {
        pthread_detach(t);
        g_thread_pid = pid;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void enqueue_item(sg_stream *s, host_item *it)
{
    it->before = sg_stream_record_marker(s);
    it->hold = sg_enqueue_deferred_marker(s);
    pthread_mutex_lock(&g_lock);
    ensure_thread_locked();
    host_item **p = &g_head;
    while (*p) p = &(*p)->next;
    *p = it;
    pthread_cond_signal(&g_cond);
    pthread_mutex_unlock(&g_lock);
}

void sg_rt_enqueue_host_fn(sg_stream *s, cudaHostFn_t fn, void *arg)
{
    host_item *it = calloc(1, sizeof *it);
    if (!it) abort();
    it->fn = fn;
    it->arg = arg;
    enqueue_item(s, it);
}

static cudaError_t launch_host_func(const char *api, cudaStream_t st, cudaHostFn_t fn, void *arg, int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (!fn) RET(cudaErrorInvalidValue);
    sg_graph_node n = {0};
    n.type = SG_NODE_HOST;
    n.host_fn = fn;
    n.host_arg = arg;
    cudaError_t err;
    if (sg_rt_capture_node(s, &n, &err)) RET(err);
    sg_rt_enqueue_host_fn(s, fn, arg);
    RET(cudaSuccess);
}
cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *arg)
{
    return launch_host_func("cudaLaunchHostFunc", st, fn, arg, 0);
}
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t st, cudaHostFn_t fn, void *arg);
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t st, cudaHostFn_t fn, void *arg)
{
    return launch_host_func("cudaLaunchHostFunc_ptsz", st, fn, arg, 1);
}
/* CUDA 13: with a synchronisation mode for the host task (how the runtime waits; no effect here). */
cudaError_t cudaLaunchHostFunc_v2(cudaStream_t st, cudaHostFn_t fn, void *arg, unsigned sync_mode);
cudaError_t cudaLaunchHostFunc_v2(cudaStream_t st, cudaHostFn_t fn, void *arg, unsigned sync_mode)
{
    (void)sync_mode;
    return launch_host_func("cudaLaunchHostFunc_v2", st, fn, arg, 0);
}
cudaError_t cudaLaunchHostFunc_v2_ptsz(cudaStream_t st, cudaHostFn_t fn, void *arg, unsigned sync_mode);
cudaError_t cudaLaunchHostFunc_v2_ptsz(cudaStream_t st, cudaHostFn_t fn, void *arg, unsigned sync_mode)
{
    (void)sync_mode;
    return launch_host_func("cudaLaunchHostFunc_v2_ptsz", st, fn, arg, 1);
}

/* cudaStreamAddCallback: like a host function, with (stream, status, arg); not capturable. */
static cudaError_t add_callback(const char *api, cudaStream_t st, cudaStreamCallback_t cb, void *arg, unsigned flags,
                                int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (!cb || flags) RET(cudaErrorInvalidValue);
    cudaError_t e = sg_rt_capture_check_stream(s);
    if (e != cudaSuccess) RET(e);
    host_item *it = calloc(1, sizeof *it);
    if (!it) RET(cudaErrorMemoryAllocation);
    it->callback = cb;
    it->stream = st;
    it->arg = arg;
    enqueue_item(s, it);
    RET(cudaSuccess);
}
cudaError_t cudaStreamAddCallback(cudaStream_t st, cudaStreamCallback_t cb, void *arg, unsigned flags)
{
    return add_callback("cudaStreamAddCallback", st, cb, arg, flags, 0);
}
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t st, cudaStreamCallback_t cb, void *arg, unsigned flags);
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t st, cudaStreamCallback_t cb, void *arg, unsigned flags)
{
    return add_callback("cudaStreamAddCallback_ptsz", st, cb, arg, flags, 1);
}
