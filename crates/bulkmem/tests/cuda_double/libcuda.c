/*
 * A test double of the CUDA driver (libcuda.so.1): the entry points
 * bulkmem's GPU backend looks up, with the driver's semantics as the CUDA
 * Driver API reference gives them and as a real driver answered the probe
 * (probe.c; its answers are tests/fixtures/cuda-probe-*.txt), so that the
 * backend runs end to end on machines without a GPU. Built by
 * tests/cuda_double.rs and found by dlopen("libcuda.so.1") through
 * LD_LIBRARY_PATH in a child process; never shipped.
 *
 * What it models:
 * - cuInit first (CUDA_ERROR_NOT_INITIALIZED before), devices with a name,
 *   memory and copy-engine count;
 * - primary contexts (retain/release counted) and each thread's context
 *   stack; calls that need a context fail without one current, and a
 *   sticky error poisons its context: every later call in it fails;
 * - "device" memory: host memory behind addresses no host pointer has, so
 *   a device pointer used as a host one faults, and copies outside an
 *   allocation are refused;
 * - registered host ranges (cuMemHostRegister_v2 bookkeeping);
 * - streams, each executed in order by a thread of the double, and events
 *   that order one stream after another (cuStreamWaitEvent waits for the
 *   event's most recent record at the time of the call);
 * - a child made by fork(): the driver is not usable there.
 *
 * What the test sets (CUDA_DOUBLE, ';'-separated, read when loaded):
 *   devices=N  name=TEXT  engines=N  memory=BYTES
 *   fail=FN:N:CODE    the Nth call of FN returns CODE (1-based)
 *   sticky=FN:N:CODE  as fail, and the context is poisoned with CODE; for
 *                     the two async copies, the Nth copy fails when the
 *                     stream executes it, as a real fault would
 *   slow=USEC         every copy takes USEC microseconds longer
 * and what it reads back: cuda_double_report(), a line of counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_api.h"

#define MAX_DEVICES 8
#define MAX_RULES 16
#define MAX_STACK 64

/* ---- state, all under one lock; C is broadcast on every change ---- */

static pthread_mutex_t L = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t C = PTHREAD_COND_INITIALIZER;

struct CUctx_st {
    int dev;
    int retained;     /* primary-context retain count */
    CUresult sticky;  /* nonzero: poisoned */
};

struct device {
    char name[128];
    int engines;
    size_t memory, used;
    struct CUctx_st ctx;
};

struct rule {
    char fn[64];
    long nth;
    CUresult code;
    int sticky;
};

struct counter {
    const char *fn;
    long calls;
};

struct alloc {
    CUdeviceptr base;
    size_t len;
    unsigned char *mem;
    struct CUctx_st *ctx;
    long inflight; /* queued or running copies that name it */
    struct alloc *next;
};

struct reg {
    uintptr_t base;
    size_t len;
    struct reg *next;
};

enum op_kind { OP_COPY, OP_RECORD, OP_WAIT };

struct op {
    enum op_kind kind;
    unsigned char *dst;
    const unsigned char *src;
    size_t len;
    struct alloc *a;
    CUresult fault; /* a sticky rule hit this copy */
    struct CUevent_st *ev;
    unsigned long seq;
    struct op *next;
};

struct CUstream_st {
    struct CUctx_st *ctx;
    pthread_t thread;
    struct op *head, *tail;
    int running, destroyed;
    struct CUstream_st *next;
};

struct CUevent_st {
    struct CUctx_st *ctx;
    unsigned long recorded, completed;
    int destroyed;
    struct CUevent_st *next;
};

static int initialised;
static pid_t owner; /* the process that called cuInit */
static int ndevices = 1;
static struct device devices[MAX_DEVICES];
static struct rule rules[MAX_RULES];
static int nrules;
static long slow_us;
static struct counter counters[32];
static struct alloc *allocs;
static struct reg *regs;
static struct CUstream_st *streams;
static struct CUevent_st *events;
static CUdeviceptr next_device_address = 0x100000000000ULL; /* 16 TiB: no host mapping */
/* Bases already freed: a real driver answered a second cuMemFree of one
 * with success (probe.c, free-twice). */
static CUdeviceptr freed[256];
static unsigned nfreed;

static __thread CUcontext stack[MAX_STACK];
static __thread int depth;

/* What the tests read back (cuda_double_report). */
static struct {
    long calls, copies, copy_bytes, unregistered_copies, freed_busy, destroyed_busy,
        child_calls, injected, faults, pending;
    int live_streams, live_events, live_allocs, live_regs;
} st;

/* ---- configuration ---- */

static void configure(void) {
    for (int i = 0; i < MAX_DEVICES; i++) {
        snprintf(devices[i].name, sizeof devices[i].name, "bulkmem CUDA test double %d, not a GPU", i);
        devices[i].engines = 2;
        devices[i].memory = (size_t)16 << 30;
        devices[i].ctx.dev = i;
    }
    const char *env = getenv("CUDA_DOUBLE");
    if (!env) return;
    char *copy = strdup(env), *save = NULL;
    for (char *kv = strtok_r(copy, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = kv, *v = eq + 1;
        if (!strcmp(k, "devices")) {
            ndevices = atoi(v);
            if (ndevices < 0) ndevices = 0;
            if (ndevices > MAX_DEVICES) ndevices = MAX_DEVICES;
        } else if (!strcmp(k, "name")) {
            for (int i = 0; i < MAX_DEVICES; i++)
                snprintf(devices[i].name, sizeof devices[i].name, "%s", v);
        } else if (!strcmp(k, "engines")) {
            for (int i = 0; i < MAX_DEVICES; i++) devices[i].engines = atoi(v);
        } else if (!strcmp(k, "memory")) {
            for (int i = 0; i < MAX_DEVICES; i++) devices[i].memory = strtoull(v, NULL, 0);
        } else if (!strcmp(k, "slow")) {
            slow_us = atol(v);
        } else if ((!strcmp(k, "fail") || !strcmp(k, "sticky")) && nrules < MAX_RULES) {
            struct rule *r = &rules[nrules];
            char fn[64];
            long nth, code;
            if (sscanf(v, "%63[^:]:%ld:%ld", fn, &nth, &code) == 3) {
                snprintf(r->fn, sizeof r->fn, "%s", fn);
                r->nth = nth;
                r->code = (CUresult)code;
                r->sticky = k[0] == 's';
                nrules++;
            }
        }
    }
    free(copy);
}

/* ---- entry bookkeeping ---- */

static long count(const char *fn) {
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        if (!counters[i].fn) counters[i].fn = fn;
        if (counters[i].fn == fn || !strcmp(counters[i].fn, fn)) return ++counters[i].calls;
    }
    return 0;
}

/* The rule for this call of fn, if one matches. */
static const struct rule *injected(const char *fn, long nth) {
    for (int i = 0; i < nrules; i++)
        if (rules[i].nth == nth && !strcmp(rules[i].fn, fn)) return &rules[i];
    return NULL;
}

/* enter()'s answer for the calls that succeed in a fork's child: no code
 * the driver has, turned into success by ENTER. */
#define CUDA_ERROR_CHILD_SUCCESS ((CUresult)0x7ffffff0)

static struct CUctx_st *current(void) { return depth ? stack[depth - 1] : NULL; }

/*
 * Every entry point but the error texts starts here, with the lock held:
 * counts the call, answers for a fork's child and before cuInit, and applies
 * an injected failure. A sticky rule poisons the current context (or device
 * 0's) first. Async copies keep their sticky rules for the stream (*later).
 */
static CUresult enter(const char *fn, int needs_init, const struct rule **later) {
    st.calls++;
    long nth = count(fn);
    if (initialised && getpid() != owner) {
        /* What a real driver did in a fork's child (probe.c): nothing
         * works, except that waiting for a stream or an event (idle
         * there) and destroying an event succeed, and destroying a stream
         * crashes. */
        st.child_calls++;
        if (!strcmp(fn, "cuStreamDestroy_v2")) {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        if (!strcmp(fn, "cuStreamSynchronize") || !strcmp(fn, "cuEventSynchronize") ||
            !strcmp(fn, "cuEventDestroy_v2"))
            return CUDA_ERROR_CHILD_SUCCESS;
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (needs_init && !initialised) return CUDA_ERROR_NOT_INITIALIZED;
    const struct rule *r = injected(fn, nth);
    if (!r) return CUDA_SUCCESS;
    if (r->sticky && later) {
        *later = r;
        return CUDA_SUCCESS;
    }
    st.injected++;
    if (r->sticky) {
        struct CUctx_st *c = current();
        (c ? c : &devices[0].ctx)->sticky = r->code;
    }
    return r->code;
}

/* The current context, usable: retained and not poisoned. A primary
 * context pushed after its last release is a destroyed one. */
static CUresult need_context(struct CUctx_st **out) {
    struct CUctx_st *c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (!c->retained) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (c->sticky) return c->sticky;
    *out = c;
    return CUDA_SUCCESS;
}

#define ENTER(fn)                                                   \
    pthread_mutex_lock(&L);                                         \
    CUresult r_ = enter(fn, 1, NULL);                               \
    if (r_ == CUDA_ERROR_CHILD_SUCCESS) return unlock(CUDA_SUCCESS);   \
    if (r_ != CUDA_SUCCESS) return unlock(r_)

static CUresult unlock(CUresult r) {
    pthread_mutex_unlock(&L);
    return r;
}

static struct device *device(CUdevice d) {
    return d >= 0 && d < ndevices ? &devices[d] : NULL;
}

/* ---- error texts (the driver's own, as the probe read them) ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult error_text(CUresult error, const char **pStr, int name) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        if (errors[i].code == error) {
            *pStr = name ? errors[i].name : errors[i].text;
            return CUDA_SUCCESS;
        }
    }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    return error_text(error, pStr, 0);
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    return error_text(error, pStr, 1);
}

/* ---- initialisation and devices ---- */

CUresult CUDAAPI cuInit(unsigned int Flags) {
    pthread_mutex_lock(&L);
    CUresult r = enter("cuInit", 0, NULL);
    if (r != CUDA_SUCCESS) return unlock(r);
    if (Flags != 0) return unlock(CUDA_ERROR_INVALID_VALUE);
    if (!initialised) {
        initialised = 1;
        owner = getpid();
    }
    return unlock(ndevices ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE);
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
    ENTER("cuDeviceGetCount");
    if (!count) return unlock(CUDA_ERROR_INVALID_VALUE);
    *count = ndevices;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGet(CUdevice *out, int ordinal) {
    ENTER("cuDeviceGet");
    if (!out) return unlock(CUDA_ERROR_INVALID_VALUE);
    if (!device(ordinal)) return unlock(CUDA_ERROR_INVALID_DEVICE);
    *out = ordinal;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
    ENTER("cuDeviceGetName");
    struct device *d = device(dev);
    if (!d) return unlock(CUDA_ERROR_INVALID_DEVICE);
    if (!name || len <= 0) return unlock(CUDA_ERROR_INVALID_VALUE);
    snprintf(name, (size_t)len, "%s", d->name);
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    ENTER("cuDeviceTotalMem_v2");
    struct device *d = device(dev);
    if (!d) return unlock(CUDA_ERROR_INVALID_DEVICE);
    if (!bytes) return unlock(CUDA_ERROR_INVALID_VALUE);
    *bytes = d->memory;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    ENTER("cuDeviceGetAttribute");
    struct device *d = device(dev);
    if (!d) return unlock(CUDA_ERROR_INVALID_DEVICE);
    if (!pi) return unlock(CUDA_ERROR_INVALID_VALUE);
    switch ((int)attrib) {
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x40 + dev; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = d->engines; break;
    default: return unlock(CUDA_ERROR_INVALID_VALUE);
    }
    return unlock(CUDA_SUCCESS);
}

/* ---- contexts ---- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    ENTER("cuDevicePrimaryCtxRetain");
    struct device *d = device(dev);
    if (!d) return unlock(CUDA_ERROR_INVALID_DEVICE);
    if (!pctx) return unlock(CUDA_ERROR_INVALID_VALUE);
    if (d->ctx.retained++ == 0) d->ctx.sticky = CUDA_SUCCESS; /* a fresh context */
    *pctx = &d->ctx;
    return unlock(CUDA_SUCCESS);
}

static void destroy_context_resources(struct CUctx_st *c);

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    ENTER("cuDevicePrimaryCtxRelease_v2");
    struct device *d = device(dev);
    if (!d) return unlock(CUDA_ERROR_INVALID_DEVICE);
    if (d->ctx.retained == 0) return unlock(CUDA_ERROR_INVALID_CONTEXT);
    if (--d->ctx.retained == 0) destroy_context_resources(&d->ctx);
    return unlock(CUDA_SUCCESS);
}

static int is_context(CUcontext c) {
    for (int i = 0; i < ndevices; i++)
        if (c == &devices[i].ctx) return 1;
    return 0;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
    ENTER("cuCtxPushCurrent_v2");
    if (!ctx || !is_context(ctx)) return unlock(CUDA_ERROR_INVALID_CONTEXT);
    if (depth == MAX_STACK) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    stack[depth++] = ctx;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx) {
    ENTER("cuCtxPopCurrent_v2");
    if (depth == 0) return unlock(CUDA_ERROR_INVALID_CONTEXT);
    CUcontext c = stack[--depth];
    if (pctx) *pctx = c;
    return unlock(CUDA_SUCCESS);
}

/* ---- device memory ---- */

static struct alloc *find_alloc(CUdeviceptr p, size_t len) {
    for (struct alloc *a = allocs; a; a = a->next)
        if (p >= a->base && p - a->base <= a->len && len <= a->len - (p - a->base)) return a;
    return NULL;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    ENTER("cuMemAlloc_v2");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!dptr || bytesize == 0) return unlock(CUDA_ERROR_INVALID_VALUE);
    struct device *d = &devices[c->dev];
    if (bytesize > d->memory - d->used) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    struct alloc *a = calloc(1, sizeof *a);
    unsigned char *mem = malloc(bytesize);
    if (!a || !mem) {
        free(a);
        free(mem);
        return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    }
    a->base = next_device_address;
    next_device_address += (bytesize + (2u << 20) - 1) / (2u << 20) * (2u << 20) + (2u << 20);
    a->len = bytesize;
    a->mem = mem;
    a->ctx = c;
    a->next = allocs;
    allocs = a;
    d->used += bytesize;
    st.live_allocs++;
    *dptr = a->base;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
    ENTER("cuMemFree_v2");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    for (struct alloc **pa = &allocs; *pa; pa = &(*pa)->next) {
        struct alloc *a = *pa;
        if (a->base != dptr) continue;
        if (a->inflight) {
            /* cuMemFree does not wait for copies queued on streams that
             * still use the memory: a caller bug, which the tests count. */
            st.freed_busy++;
            while (a->inflight) pthread_cond_wait(&C, &L);
        }
        *pa = a->next;
        devices[a->ctx->dev].used -= a->len;
        freed[nfreed++ % (sizeof freed / sizeof freed[0])] = a->base;
        free(a->mem);
        free(a);
        st.live_allocs--;
        return unlock(CUDA_SUCCESS);
    }
    for (unsigned i = 0; i < nfreed && i < sizeof freed / sizeof freed[0]; i++)
        if (freed[i] == dptr) return unlock(CUDA_SUCCESS);
    return unlock(CUDA_ERROR_INVALID_VALUE);
}

/* ---- pinned host memory ---- */

static struct reg *find_reg(uintptr_t p, size_t len) {
    for (struct reg *g = regs; g; g = g->next)
        if (p >= g->base && p - g->base <= g->len && len <= g->len - (p - g->base)) return g;
    return NULL;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
    ENTER("cuMemHostRegister_v2");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!p || bytesize == 0 || (Flags & ~0x0fu)) return unlock(CUDA_ERROR_INVALID_VALUE);
    /* Overlap is judged on bytes: two ranges sharing a page both
     * register (as a real driver answered, register-page-mate-b). */
    uintptr_t lo = (uintptr_t)p, hi = lo + bytesize;
    for (struct reg *g = regs; g; g = g->next)
        if (lo < g->base + g->len && g->base < hi)
            return unlock(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    struct reg *g = calloc(1, sizeof *g);
    if (!g) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    g->base = (uintptr_t)p;
    g->len = bytesize;
    g->next = regs;
    regs = g;
    st.live_regs++;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemHostUnregister(void *p) {
    ENTER("cuMemHostUnregister");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    for (struct reg **pg = &regs; *pg; pg = &(*pg)->next) {
        if ((*pg)->base != (uintptr_t)p) continue;
        struct reg *g = *pg;
        *pg = g->next;
        free(g);
        st.live_regs--;
        return unlock(CUDA_SUCCESS);
    }
    /* Inside a registered range but not its start: a bad argument, not an
     * unknown range (as a real driver answered). */
    if (find_reg((uintptr_t)p, 1)) return unlock(CUDA_ERROR_INVALID_VALUE);
    return unlock(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

/* ---- streams and events ---- */

static int live_stream(CUstream s) {
    for (struct CUstream_st *x = streams; x; x = x->next)
        if (x == s && !x->destroyed) return 1;
    return 0;
}

static int live_event(CUevent e) {
    for (struct CUevent_st *x = events; x; x = x->next)
        if (x == e && !x->destroyed) return 1;
    return 0;
}

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

/* A stream's thread: runs its operations in order until it is destroyed
 * and empty. */
static void *stream_main(void *arg) {
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&L);
    for (;;) {
        while (!s->head && !s->destroyed) pthread_cond_wait(&C, &L);
        if (!s->head) break;
        struct op *o = s->head;
        s->running = 1;
        if (o->kind == OP_WAIT) {
            while (o->ev->completed < o->seq && !s->ctx->sticky) pthread_cond_wait(&C, &L);
        } else if (o->kind == OP_RECORD) {
            if (o->ev->completed < o->seq) o->ev->completed = o->seq;
        } else if (o->fault) {
            s->ctx->sticky = o->fault; /* the copy faults: nothing written */
            st.faults++;
        } else if (!s->ctx->sticky) {
            pthread_mutex_unlock(&L);
            if (slow_us) sleep_us(slow_us);
            memcpy(o->dst, o->src, o->len);
            pthread_mutex_lock(&L);
            st.copies++;
            st.copy_bytes += (long)o->len;
        }
        if (o->a) o->a->inflight--;
        st.pending--;
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        s->running = 0;
        free(o);
        pthread_cond_broadcast(&C);
    }
    pthread_mutex_unlock(&L);
    return NULL;
}

static void push_op(struct CUstream_st *s, struct op *o) {
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    st.pending++;
    if (o->a) o->a->inflight++;
    pthread_cond_broadcast(&C);
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    ENTER("cuStreamCreate");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return unlock(CUDA_ERROR_INVALID_VALUE);
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    s->ctx = c;
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        free(s);
        return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    }
    s->next = streams;
    streams = s;
    st.live_streams++;
    *phStream = s;
    return unlock(CUDA_SUCCESS);
}

/* Marks the stream destroyed; its thread finishes what is queued (as the
 * driver releases a busy stream's resources once its work is done). */
static void destroy_stream(struct CUstream_st *s) {
    if (s->head || s->running) st.destroyed_busy++;
    s->destroyed = 1;
    st.live_streams--;
    pthread_cond_broadcast(&C);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
    ENTER("cuStreamDestroy_v2");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!live_stream(hStream)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    destroy_stream(hStream);
    return unlock(CUDA_SUCCESS);
}

/* Needs no current context: the stream knows its own (as a real driver
 * answered, sync-no-context). */
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
    ENTER("cuStreamSynchronize");
    if (!live_stream(hStream)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    struct CUstream_st *s = hStream;
    while (s->running || (s->head && !s->ctx->sticky)) pthread_cond_wait(&C, &L);
    return unlock(s->ctx->sticky);
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    ENTER("cuEventCreate");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!phEvent || (Flags & ~0x0fu)) return unlock(CUDA_ERROR_INVALID_VALUE);
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    e->ctx = c;
    e->next = events;
    events = e;
    st.live_events++;
    *phEvent = e;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
    ENTER("cuEventDestroy_v2");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!live_event(hEvent)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    hEvent->destroyed = 1; /* kept: a queued wait may still name it */
    st.live_events--;
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
    ENTER("cuEventRecord");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!live_event(hEvent) || !live_stream(hStream)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    struct op *o = calloc(1, sizeof *o);
    if (!o) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    o->kind = OP_RECORD;
    o->ev = hEvent;
    o->seq = ++hEvent->recorded;
    push_op(hStream, o);
    return unlock(CUDA_SUCCESS);
}

/* As cuStreamSynchronize, no current context needed (sync-no-context
 * and event-sync-no-context in the probe). */
CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
    ENTER("cuEventSynchronize");
    if (!live_event(hEvent)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    while (hEvent->completed < hEvent->recorded && !hEvent->ctx->sticky) pthread_cond_wait(&C, &L);
    return unlock(hEvent->ctx->sticky);
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    ENTER("cuStreamWaitEvent");
    struct CUctx_st *c;
    CUresult r = need_context(&c);
    if (r) return unlock(r);
    if (!live_event(hEvent) || !live_stream(hStream)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    if (Flags & ~1u) return unlock(CUDA_ERROR_INVALID_VALUE);
    if (hEvent->recorded == 0) return unlock(CUDA_SUCCESS); /* never recorded: no-op */
    struct op *o = calloc(1, sizeof *o);
    if (!o) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    o->kind = OP_WAIT;
    o->ev = hEvent;
    o->seq = hEvent->recorded;
    push_op(hStream, o);
    return unlock(CUDA_SUCCESS);
}

/* ---- copies ---- */

static CUresult enqueue_copy(const char *fn, CUstream hStream, unsigned char *dst,
                             const unsigned char *src, size_t len, CUdeviceptr dev,
                             const void *host) {
    const struct rule *later = NULL;
    pthread_mutex_lock(&L);
    CUresult r = enter(fn, 1, &later);
    if (r) return unlock(r);
    struct CUctx_st *c;
    r = need_context(&c);
    if (r) return unlock(r);
    if (hStream && !live_stream(hStream)) return unlock(CUDA_ERROR_INVALID_HANDLE);
    if (len == 0) return unlock(CUDA_SUCCESS);
    struct alloc *a = find_alloc(dev, len);
    if (!a) return unlock(CUDA_ERROR_INVALID_VALUE);
    if (!find_reg((uintptr_t)host, len)) st.unregistered_copies++; /* legal, but not bulkmem's promise */
    unsigned char *dmem = a->mem + (dev - a->base);
    if (dst == NULL) dst = dmem; else src = dmem;
    struct op *o = calloc(1, sizeof *o);
    if (!o) return unlock(CUDA_ERROR_OUT_OF_MEMORY);
    o->kind = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->len = len;
    o->a = a;
    o->fault = later ? later->code : CUDA_SUCCESS;
    if (!hStream) { /* the legacy default stream: done before returning */
        if (!o->fault) memcpy(o->dst, o->src, o->len);
        else c->sticky = o->fault;
        free(o);
        return unlock(c->sticky);
    }
    push_op(hStream, o);
    return unlock(CUDA_SUCCESS);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                      CUstream hStream) {
    return enqueue_copy("cuMemcpyHtoDAsync_v2", hStream, NULL, srcHost, ByteCount, dstDevice,
                        srcHost);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream) {
    return enqueue_copy("cuMemcpyDtoHAsync_v2", hStream, dstHost, NULL, ByteCount, srcDevice,
                        dstHost);
}

/* The driver frees what a context held when its last retain goes. */
static void destroy_context_resources(struct CUctx_st *c) {
    for (struct CUstream_st *s = streams; s; s = s->next)
        if (s->ctx == c && !s->destroyed) destroy_stream(s);
    for (struct CUevent_st *e = events; e; e = e->next)
        if (e->ctx == c && !e->destroyed) {
            e->destroyed = 1;
            st.live_events--;
        }
    for (struct alloc **pa = &allocs; *pa;) {
        struct alloc *a = *pa;
        if (a->ctx != c) {
            pa = &a->next;
            continue;
        }
        while (a->inflight) pthread_cond_wait(&C, &L);
        *pa = a->next;
        devices[c->dev].used -= a->len;
        free(a->mem);
        free(a);
        st.live_allocs--;
    }
}

/* ---- fork ---- */

static void before_fork(void) { pthread_mutex_lock(&L); }
static void after_fork(void) { pthread_mutex_unlock(&L); }

/* Configured when loaded, so that rules for cuInit itself apply. */
__attribute__((constructor)) static void double_init(void) {
    configure();
    pthread_atfork(before_fork, after_fork, after_fork);
}

/* ---- what the tests read ---- */

const char *cuda_double_report(void) {
    static char line[512];
    pthread_mutex_lock(&L);
    int retained = 0;
    for (int i = 0; i < ndevices; i++) retained += devices[i].ctx.retained;
    snprintf(line, sizeof line,
             "calls=%ld copies=%ld copy_bytes=%ld unregistered_copies=%ld freed_busy=%ld "
             "destroyed_busy=%ld child_calls=%ld injected=%ld faults=%ld pending=%ld streams=%d "
             "events=%d allocs=%d registered=%d retained=%d",
             st.calls, st.copies, st.copy_bytes, st.unregistered_copies, st.freed_busy,
             st.destroyed_busy, st.child_calls, st.injected, st.faults, st.pending, st.live_streams,
             st.live_events, st.live_allocs, st.live_regs, retained);
    pthread_mutex_unlock(&L);
    return line;
}
