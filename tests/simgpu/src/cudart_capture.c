/* cudart_capture.c - mock CUDA runtime: stream capture into graphs (cudart_graph.c).
 *
 * A capture sequence starts on one stream (cudaStreamBeginCapture[ToGraph]); other streams join it
 * by waiting on an event recorded in it (fork) and must be waited on by the origin stream before
 * cudaStreamEndCapture (join), as in CUDA. Work queued on a member stream becomes a graph node and
 * runs nothing; cudaGraphLaunch of an instantiation queues the nodes, in capture order, on the launch
 * stream (branches are serialised). Rules enforced (cudaStreamCaptureMode, driver_types.h errors):
 * legacy-stream work while a blocking stream of the device captures -> 906 and invalidation; query /
 * synchronize of a capturing stream -> 900, of an event recorded in a capture -> 907; a capturing
 * stream waiting on an event recorded outside it -> 905 (902 across two captures); potentially unsafe
 * calls (cudaMalloc, cudaDeviceSynchronize) forbidden by the thread's interaction mode -> 900. Each
 * invalidates the capture: later captured work returns 901, and cudaStreamEndCapture returns 901
 * with a NULL graph (904 for a fork that was never joined). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cudart_internal.h"

/* ---------------------------------------------------------------- capture sequences */

#define MAX_MEMBERS 64
typedef struct member {
    sg_stream *s;
    uint64_t ops;       /* nodes captured from this stream */
    uint64_t joined;    /* ops of this stream the origin has waited on (directly) */
    int via;            /* member index this stream was joined into (-1: none), for transitive joins */
    uint64_t via_seq;
} member;
typedef struct sg_capture {
    uint64_t id;
    sg_graph *graph;
    int own_graph; /* created by the capture (freed if it fails), not given to cudaStreamBeginCaptureToGraph */
    int mode;
    pthread_t thread;
    int invalidated;
    member m[MAX_MEMBERS]; /* m[0] is the origin stream */
    int nm;
    struct sg_capture *next;
} sg_capture;

static pthread_mutex_t g_cap_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_capture *g_captures;
static int g_active; /* captures in progress, read without the lock on every queued op */
static uint64_t g_capture_ids;
static __thread int t_mode = cudaStreamCaptureModeGlobal;

static sg_capture *capture_of_locked(sg_stream *s) { return (sg_capture *)sg_stream_capture_slot_get(s); }

static member *member_of(sg_capture *c, sg_stream *s)
{
    for (int i = 0; i < c->nm; i++)
        if (c->m[i].s == s) return &c->m[i];
    return NULL;
}

static sg_capture *capture_by_id_locked(uint64_t id)
{
    for (sg_capture *c = g_captures; c && id; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

static int is_legacy(sg_stream *s) { return s == sg_stream_resolve(SG_STREAM_LEGACY, 0); }

/* Every member stream is joined into the origin: directly (the origin waited on an event recorded
 * after its last node) or through a member that is. */
static int all_joined_locked(const sg_capture *c)
{
    int joined[MAX_MEMBERS] = {0};
    joined[0] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 1; i < c->nm; i++) {
            if (joined[i]) continue;
            const member *m = &c->m[i];
            if (m->ops <= m->joined || (m->via >= 0 && joined[m->via] && m->ops <= m->via_seq)) {
                joined[i] = 1;
                changed = 1;
            }
        }
    }
    for (int i = 0; i < c->nm; i++)
        if (!joined[i]) return 0;
    return 1;
}

static void capture_end_locked(sg_capture *c)
{
    for (int i = 0; i < c->nm; i++) sg_stream_capture_slot_set(c->m[i].s, NULL);
    for (sg_capture **p = &g_captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    __atomic_sub_fetch(&g_active, 1, __ATOMIC_RELEASE);
    free(c);
}

int sg_rt_capture_node(sg_stream *s, const sg_graph_node *n, cudaError_t *err)
{
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_of_locked(s);
    if (c) {
        if (c->invalidated) {
            *err = cudaErrorStreamCaptureInvalidated;
        } else {
            *err = sg_rt_graph_append(c->graph, n) ? cudaErrorMemoryAllocation : cudaSuccess;
            member *m = member_of(c, s);
            if (m && *err == cudaSuccess) m->ops++;
        }
        pthread_mutex_unlock(&g_cap_lock);
        return 1;
    }
    int implicit = 0;
    if (is_legacy(s)) {
        int dev = sg_stream_device(s);
        for (sg_capture *k = g_captures; k; k = k->next)
            for (int i = 0; i < k->nm; i++)
                if (sg_stream_device(k->m[i].s) == dev && !sg_stream_nonblocking(k->m[i].s)) {
                    k->invalidated = 1;
                    implicit = 1;
                }
    }
    pthread_mutex_unlock(&g_cap_lock);
    if (implicit) *err = cudaErrorStreamCaptureImplicit;
    return implicit;
}

int sg_rt_capture_would_take(sg_stream *s)
{
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&g_cap_lock);
    int c = capture_of_locked(s) != NULL;
    pthread_mutex_unlock(&g_cap_lock);
    return c;
}

int sg_rt_capture_event_record(sg_stream *s, sg_capture_mark *mark, cudaError_t *err)
{
    memset(mark, 0, sizeof *mark);
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_of_locked(s);
    if (c) {
        member *m = member_of(c, s);
        mark->capture_id = c->id;
        mark->stream = s;
        mark->seq = m ? m->ops : 0;
        *err = c->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
    }
    pthread_mutex_unlock(&g_cap_lock);
    return c != NULL;
}

int sg_rt_capture_event_wait(sg_stream *s, const sg_capture_mark *mark, int recorded, unsigned flags,
                             cudaError_t *err)
{
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *cs = capture_of_locked(s);
    sg_capture *ce = capture_by_id_locked(mark->capture_id);
    int handled = 1;
    *err = cudaSuccess;
    if (ce && !cs) {
        /* fork: s joins the event's capture */
        if (ce->invalidated) {
            *err = cudaErrorStreamCaptureInvalidated;
        } else if (ce->nm == MAX_MEMBERS) {
            ce->invalidated = 1;
            *err = cudaErrorStreamCaptureUnsupported;
        } else {
            ce->m[ce->nm++] = (member){s, 0, 0, -1, 0};
            sg_stream_capture_slot_set(s, ce);
        }
    } else if (ce && cs != ce) {
        cs->invalidated = ce->invalidated = 1;
        *err = cudaErrorStreamCaptureMerge;
    } else if (ce) {
        /* a dependency inside the capture: a join when it leads into the origin */
        member *src = member_of(ce, mark->stream);
        member *dst = member_of(ce, s);
        if (src && dst && src != dst) {
            if (dst == &ce->m[0]) {
                if (mark->seq > src->joined) src->joined = mark->seq;
            } else {
                src->via = (int)(dst - ce->m);
                if (mark->seq > src->via_seq) src->via_seq = mark->seq;
            }
        }
    } else if (cs) {
        /* a capturing stream waiting on work outside the capture */
        if (recorded && !(flags & cudaEventWaitExternal)) {
            cs->invalidated = 1;
            *err = cudaErrorStreamCaptureIsolation;
        }
    } else {
        handled = 0;
    }
    pthread_mutex_unlock(&g_cap_lock);
    return handled;
}

cudaError_t sg_rt_capture_check_event(const sg_capture_mark *mark)
{
    if (!mark->capture_id || !__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return cudaSuccess;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_by_id_locked(mark->capture_id);
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&g_cap_lock);
    return c ? cudaErrorCapturedEvent : cudaSuccess;
}

cudaError_t sg_rt_capture_check_stream(sg_stream *s)
{
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE)) return cudaSuccess;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_of_locked(s);
    if (c) c->invalidated = 1;
    pthread_mutex_unlock(&g_cap_lock);
    return c ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t sg_rt_capture_check_unsafe(void)
{
    if (!__atomic_load_n(&g_active, __ATOMIC_ACQUIRE) || t_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
    int forbidden = 0;
    pthread_mutex_lock(&g_cap_lock);
    for (sg_capture *c = g_captures; c; c = c->next) {
        if (c->mode == cudaStreamCaptureModeRelaxed) continue;
        int mine = pthread_equal(c->thread, pthread_self());
        if (mine || (t_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal)) {
            c->invalidated = 1;
            forbidden = 1;
        }
    }
    pthread_mutex_unlock(&g_cap_lock);
    return forbidden ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

/* ---------------------------------------------------------------- capture API */

/* into: the graph of cudaStreamBeginCaptureToGraph (to_graph), else a new one. */
/* Nodes another library (the simulated NCCL) adds to the capture s belongs to (core_internal.h). */
static int capture_external(sg_stream *s, const sg_capture_item *it, int *err)
{
    sg_graph_node n;
    memset(&n, 0, sizeof n);
    if (it->host_fn) {
        n.type = SG_NODE_HOST;
        n.host_fn = it->host_fn;
        n.host_arg = it->host_arg;
    } else {
        n.type = SG_NODE_KERNEL;
        n.k = it->k;
        n.k.name = sg_intern(it->k.name);
        n.replay = it->replay;
        n.replay_ctx = it->replay_ctx;
    }
    cudaError_t e = cudaSuccess;
    int taken = sg_rt_capture_node(s, &n, &e);
    *err = (int)e;
    return taken;
}

static cudaError_t begin_capture(const char *api, cudaStream_t st, int to_graph, cudaGraph_t into, int mode, int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (to_graph && !sg_rt_graph_get(into)) RET(cudaErrorInvalidValue);
    if (is_legacy(s)) RET(cudaErrorStreamCaptureUnsupported);
    if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) RET(cudaErrorInvalidValue);
    sg_graph *g = to_graph ? sg_rt_graph_get(into) : sg_rt_graph_new();
    if (!g) RET(cudaErrorMemoryAllocation);
    sg_capture *c = calloc(1, sizeof *c);
    if (!c) {
        if (!to_graph) sg_rt_graph_free(g);
        RET(cudaErrorMemoryAllocation);
    }
    sg_set_capture_hook(capture_external);
    pthread_mutex_lock(&g_cap_lock);
    if (capture_of_locked(s)) {
        pthread_mutex_unlock(&g_cap_lock);
        free(c);
        if (!to_graph) sg_rt_graph_free(g);
        RET(cudaErrorIllegalState);
    }
    c->id = ++g_capture_ids;
    c->graph = g;
    c->own_graph = !to_graph;
    c->mode = mode;
    c->thread = pthread_self();
    c->m[0] = (member){s, 0, 0, -1, 0};
    c->nm = 1;
    c->next = g_captures;
    g_captures = c;
    sg_stream_capture_slot_set(s, c);
    __atomic_add_fetch(&g_active, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_cap_lock);
    RET(cudaSuccess);
}
cudaError_t cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode)
{
    return begin_capture("cudaStreamBeginCapture", st, 0, NULL, (int)mode, 0);
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t st, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t st, enum cudaStreamCaptureMode mode)
{
    return begin_capture("cudaStreamBeginCapture_ptsz", st, 0, NULL, (int)mode, 1);
}
cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t st, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                          const cudaGraphEdgeData *edges, size_t ndeps, enum cudaStreamCaptureMode mode)
{
    (void)deps, (void)edges, (void)ndeps; /* the captured nodes are appended to the graph */
    return begin_capture("cudaStreamBeginCaptureToGraph", st, 1, graph, (int)mode, 0);
}
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t st, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *edges, size_t ndeps,
                                               enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t st, cudaGraph_t graph, const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *edges, size_t ndeps,
                                               enum cudaStreamCaptureMode mode)
{
    (void)deps, (void)edges, (void)ndeps;
    return begin_capture("cudaStreamBeginCaptureToGraph_ptsz", st, 1, graph, (int)mode, 1);
}

static cudaError_t end_capture(const char *api, cudaStream_t st, cudaGraph_t *pg, int pt)
{
    sg_rt_init();
    API(api, NULL);
    sg_stream *s = sg_stream_resolve(st, pt);
    if (!s) RET(cudaErrorInvalidResourceHandle);
    if (!pg) RET(cudaErrorInvalidValue);
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_of_locked(s);
    cudaError_t e = cudaSuccess;
    if (!c) {
        e = cudaErrorIllegalState;
    } else if (c->m[0].s != s) {
        e = cudaErrorStreamCaptureUnmatched;
    } else if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self())) {
        e = cudaErrorStreamCaptureWrongThread;
    }
    if (e != cudaSuccess) {
        pthread_mutex_unlock(&g_cap_lock);
        RET(e);
    }
    sg_graph *g = c->graph;
    int own = c->own_graph;
    if (c->invalidated)
        e = cudaErrorStreamCaptureInvalidated;
    else if (!all_joined_locked(c))
        e = cudaErrorStreamCaptureUnjoined;
    capture_end_locked(c);
    pthread_mutex_unlock(&g_cap_lock);
    if (e != cudaSuccess) {
        if (own) sg_rt_graph_free(g);
        *pg = NULL;
        RET(e);
    }
    *pg = (cudaGraph_t)g;
    RET(cudaSuccess);
}
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *pg) { return end_capture("cudaStreamEndCapture", st, pg, 0); }
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t st, cudaGraph_t *pg);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t st, cudaGraph_t *pg)
{
    return end_capture("cudaStreamEndCapture_ptsz", st, pg, 1);
}

/* Status, id and graph of the capture s belongs to (cudaStreamIsCapturing / GetCaptureInfo). */
static cudaError_t capture_info(sg_stream *s, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                cudaGraph_t *graph)
{
    if (!s) return cudaErrorInvalidResourceHandle;
    if (!status) return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_cap_lock);
    sg_capture *c = capture_of_locked(s);
    *status = !c ? cudaStreamCaptureStatusNone
                 : c->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    if (c && id) *id = c->id;
    if (c && graph) *graph = (cudaGraph_t)c->graph;
    pthread_mutex_unlock(&g_cap_lock);
    return cudaSuccess;
}

static cudaError_t is_capturing(const char *api, cudaStream_t st, enum cudaStreamCaptureStatus *status, int pt)
{
    sg_rt_init();
    API(api, NULL);
    RET(capture_info(sg_stream_resolve(st, pt), status, NULL, NULL));
}
cudaError_t cudaStreamIsCapturing(cudaStream_t st, enum cudaStreamCaptureStatus *status)
{
    return is_capturing("cudaStreamIsCapturing", st, status, 0);
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status);
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status)
{
    return is_capturing("cudaStreamIsCapturing_ptsz", st, status, 1);
}

/* cudaStreamGetCaptureInfo in its three layouts: 3 arguments (CUDA 11.0 symbol, still exported by
 * libcudart.so.12), _v2 (6: + graph, dependencies, count), _v3 and CUDA 13's plain symbol (7: + edge
 * data). Dependencies are not tracked: none are reported. */
static cudaError_t capture_info_call(const char *api, cudaStream_t st, int pt, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                     const cudaGraphEdgeData **edges, size_t *ndeps)
{
    sg_rt_init();
    API(api, NULL);
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (ndeps) *ndeps = 0;
    RET(capture_info(sg_stream_resolve(st, pt), status, id, graph));
}
#undef cudaStreamGetCaptureInfo
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t st, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                     cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps);
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t st, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                     cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *ndeps)
{
    if (sg_cudart_version() < 13000) graph = NULL, deps = NULL, edges = NULL, ndeps = NULL;
    return capture_info_call("cudaStreamGetCaptureInfo", st, 0, status, id, graph, deps, edges, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                          unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                          unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *ndeps)
{
    if (sg_cudart_version() < 13000) graph = NULL, deps = NULL, edges = NULL, ndeps = NULL;
    return capture_info_call("cudaStreamGetCaptureInfo_ptsz", st, 1, status, id, graph, deps, edges, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_v2(cudaStream_t st, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                        cudaGraph_t *graph, const cudaGraphNode_t **deps, size_t *ndeps)
{
    return capture_info_call("cudaStreamGetCaptureInfo_v2", st, 0, status, id, graph, deps, NULL, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                             unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                             size_t *ndeps);
cudaError_t cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                             unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                             size_t *ndeps)
{
    return capture_info_call("cudaStreamGetCaptureInfo_v2_ptsz", st, 1, status, id, graph, deps, NULL, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_v3(cudaStream_t st, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                        cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                        const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return capture_info_call("cudaStreamGetCaptureInfo_v3", st, 0, status, id, graph, deps, edges, ndeps);
}
cudaError_t cudaStreamGetCaptureInfo_v3_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                             unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                             const cudaGraphEdgeData **edges, size_t *ndeps);
cudaError_t cudaStreamGetCaptureInfo_v3_ptsz(cudaStream_t st, enum cudaStreamCaptureStatus *status,
                                             unsigned long long *id, cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                             const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return capture_info_call("cudaStreamGetCaptureInfo_v3_ptsz", st, 1, status, id, graph, deps, edges, ndeps);
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    sg_rt_init();
    API("cudaThreadExchangeStreamCaptureMode", NULL);
    if (!mode || (int)*mode < cudaStreamCaptureModeGlobal || (int)*mode > cudaStreamCaptureModeRelaxed)
        RET(cudaErrorInvalidValue);
    int old = t_mode;
    t_mode = (int)*mode;
    *mode = (enum cudaStreamCaptureMode)old;
    RET(cudaSuccess);
}
