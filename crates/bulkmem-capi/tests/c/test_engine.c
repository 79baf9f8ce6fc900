/* test_engine.c - the multi-threaded batch engine: options, batches,
 * progress, cancellation and concurrent submitters. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bulkmem.h"
#include "check.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
#define CANARY 0x33

static int all_eq(const unsigned char *p, size_t n, unsigned char b)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != b)
            return 0;
    return 1;
}

static unsigned char *alloc_pattern(size_t n, uint32_t seed)
{
    unsigned char *p = malloc(n);
    uint64_t *w = (uint64_t *)p, x = seed * 0x9E3779B97F4A7C15ull + 1;
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    for (size_t i = 0; i < n / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        w[i] = x;
    }
    return p;
}

/* n extents of `each` bytes: extent i copies source block i into
 * destination block perm[i] (a shuffled order). */
static void make_batch(bm_extent *e, size_t n, size_t each, unsigned char *d, const unsigned char *s,
                       uint32_t seed)
{
    size_t *perm = malloc(n * sizeof *perm);
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        size_t j = x % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].dst = d + perm[i] * each;
        e[i].src = s + i * each;
        e[i].len = each;
    }
    free(perm);
}

/* Extents [from, to) whose destination differs from their source. */
static size_t count_bad(const bm_extent *e, size_t from, size_t to)
{
    size_t bad = 0;
    for (size_t i = from; i < to; i++)
        bad += memcmp(e[i].dst, e[i].src, e[i].len) != 0;
    return bad;
}

typedef struct {
    pthread_mutex_t mu;
    size_t calls, max_done, last_done, over, bad_total, total;
    volatile int *cancel_after_first; /* set to 1 on the first call if non-NULL */
} prog;

static void on_progress(size_t done, size_t total, void *ctx)
{
    prog *p = ctx;
    pthread_mutex_lock(&p->mu);
    p->calls++;
    p->last_done = done;
    if (done > p->max_done) p->max_done = done;
    if (done > total) p->over++;
    if (total != p->total) p->bad_total++;
    if (p->cancel_after_first) *p->cancel_after_first = 1;
    pthread_mutex_unlock(&p->mu);
}

static void prog_init(prog *p, size_t total, volatile int *cancel)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->total = total;
    p->cancel_after_first = cancel;
}

static void test_options(void)
{
    bm_engine_opts o;
    bm_engine *e;
    memset(&o, 0, sizeof o);
    e = bm_engine_new(&o);
    CHECKF(e != NULL, "bm_engine_new(all-zero opts): errno %d: %s", errno, bm_last_error());
    bm_engine_free(e);
#define REJECT(what, field, value, want)                                                        \
    do {                                                                                        \
        memset(&o, 0, sizeof o);                                                                \
        o.field = value;                                                                        \
        errno = 0;                                                                              \
        e = bm_engine_new(&o);                                                                  \
        int err_ = errno;                                                                       \
        CHECKF(e == NULL && err_ == want, "bm_engine_new(%s): engine %p, errno %d, want NULL/%d", \
               what, (void *)e, err_, want);                                                    \
        bm_engine_free(e);                                                                      \
    } while (0)
    REJECT("strategy avx3", strategy, "avx3", EINVAL);
    REJECT("hint 9", hint, 9, EINVAL);
    REJECT("placement 7", placement, 7, EINVAL);
    /* A strategy that could do both operations but this CPU lacks. */
    static const char *const both[] = {"libc", "avx2", "avx2-nt", "avx512", "avx512-nt", "portable", NULL};
    for (size_t i = 0; both[i]; i++)
        if (bm_strategy_available(both[i]) == 0) {
            REJECT(both[i], strategy, both[i], ENOTSUP);
            break;
        }
#undef REJECT
}

typedef struct {
    bm_engine *e;
    unsigned char *s, *d;
    int id, rc, bad;
} submitter;

static void *submit(void *arg)
{
    submitter *t = arg;
    enum { N = 32, EACH = 256 * 1024 };
    bm_extent e[N];
    for (int round = 0; round < 6; round++) {
        memset(t->d, 0, N * EACH);
        make_batch(e, N, EACH, t->d, t->s, (uint32_t)(t->id * 100 + round));
        int rc = bm_engine_copy_batch(t->e, e, N);
        if (rc != 0 && t->rc == 0) t->rc = rc;
        t->bad += (int)count_bad(e, 0, N);
    }
    return NULL;
}

static void test_concurrent(bm_engine *e)
{
    submitter t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i].e = e, t[i].id = i, t[i].rc = 0, t[i].bad = 0;
        t[i].s = alloc_pattern(8 * MIB, 40 + i), t[i].d = malloc(8 * MIB);
        CHECK(pthread_create(&th[i], NULL, submit, &t[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECKF(t[i].rc == 0 && t[i].bad == 0, "concurrent submitter %d: rc %d, %d bad extents", i, t[i].rc, t[i].bad);
        free(t[i].s), free(t[i].d);
    }
}

static void test_batches(bm_engine *e, const char *name)
{
    enum { N = 128 };
    const size_t each = 256 * KIB, total = N * each;
    unsigned char *s = alloc_pattern(total, 7), *d = malloc(total);
    bm_extent x[N], bad[N];
    bm_report r;
    prog p;
    int rc;
    make_batch(x, N, each, d, s, 11);
    memset(d, CANARY, total);
    rc = bm_engine_copy_batch(e, x, N);
    CHECKF(rc == 0 && count_bad(x, 0, N) == 0, "%s: copy of 128 shuffled 256 KiB extents: rc %d", name, rc);

    for (size_t i = 0; i < N; i += 2) bad[i / 2] = x[i];
    rc = bm_engine_clear_batch(e, bad, N / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++)
        wrong += i % 2 ? memcmp(x[i].dst, x[i].src, each) != 0 : !all_eq(x[i].dst, each, 0);
    CHECKF(rc == 0 && wrong == 0, "%s: clear of the even extents: rc %d, %zu wrong extents", name, rc, wrong);

    CHECKF(bm_engine_copy_batch(e, NULL, 0) == 0 && bm_engine_clear_batch(e, x, 0) == 0, "%s: n == 0", name);
    CHECKF(bm_engine_copy_batch(e, NULL, 4) == -EINVAL, "%s: NULL extents with n 4", name);
    memset(d, CANARY, total);
    memcpy(bad, x, sizeof x);
    bad[100].dst = (unsigned char *)bad[3].dst + 4096;
    rc = bm_engine_copy_batch(e, bad, N);
    CHECKF(rc == -EINVAL && all_eq(d, total, CANARY), "%s: overlapping copy batch: rc %d, %s", name, rc,
           all_eq(d, total, CANARY) ? "untouched" : "WRITTEN");
    rc = bm_engine_clear_batch_ctl(e, bad, N, NULL, NULL);
    CHECKF(rc == -EINVAL && all_eq(d, total, CANARY), "%s: overlapping clear batch: rc %d, %s", name, rc,
           all_eq(d, total, CANARY) ? "untouched" : "WRITTEN");
    bad[100].dst = x[100].dst, bad[9].dst = NULL;
    CHECKF(bm_engine_copy_batch(e, bad, N) == -EINVAL && all_eq(d, total, CANARY), "%s: NULL dst in a batch", name);

    /* Progress and report. */
    prog_init(&p, total, NULL);
    bm_ctl c = {on_progress, &p, NULL};
    memset(&r, 0, sizeof r);
    rc = bm_engine_copy_batch_ctl(e, x, N, &c, &r);
    CHECKF(rc == 0 && count_bad(x, 0, N) == 0, "%s: copy_batch_ctl: rc %d", name, rc);
    CHECKF(p.calls >= 1 && p.over == 0 && p.bad_total == 0 && p.max_done == total,
           "%s: progress: %zu calls, %zu with done > total, %zu with a wrong total, max done %zu of %zu"
           " (last %zu)", name, p.calls, p.over, p.bad_total, p.max_done, total, p.last_done);
    CHECKF(r.total == total && r.bytes_done == total && r.extents_done == N && r.cancelled == 0 &&
           r.strategy && r.strategy[0] && r.workers >= 1 && r.workers <= bm_engine_threads(e),
           "%s: report: total %zu, bytes_done %zu, extents_done %zu, workers %zu, cancelled %d, strategy %s",
           name, r.total, r.bytes_done, r.extents_done, r.workers, r.cancelled, r.strategy ? r.strategy : "NULL");
    pthread_mutex_destroy(&p.mu);

    prog_init(&p, total, NULL);
    rc = bm_engine_clear_batch_ctl(e, x, N, &c, &r);
    CHECKF(rc == 0 && all_eq(d, total, 0) && r.bytes_done == total && p.max_done == total,
           "%s: clear_batch_ctl: rc %d, bytes_done %zu, max progress %zu", name, rc, r.bytes_done, p.max_done);
    CHECK_EQ_INT(bm_engine_copy_batch_ctl(e, x, N, NULL, NULL), 0);
    pthread_mutex_destroy(&p.mu);

    /* A cancel flag set before the call: nothing runs. */
    volatile int stop = 1;
    bm_ctl pre = {NULL, NULL, &stop};
    memset(d, CANARY, total);
    memset(&r, 0, sizeof r);
    rc = bm_engine_copy_batch_ctl(e, x, N, &pre, &r);
    CHECKF(rc == -ECANCELED && r.cancelled == 1 && r.bytes_done == 0 && r.extents_done == 0 &&
           all_eq(d, total, CANARY), "%s: pre-cancelled copy: rc %d, cancelled %d, bytes_done %zu, extents_done %zu",
           name, rc, r.cancelled, r.bytes_done, r.extents_done);
    CHECK_EQ_INT(bm_engine_clear_batch_ctl(e, x, N, &pre, NULL), -ECANCELED);
    CHECK(all_eq(d, total, CANARY));
    free(s), free(d);
}

/* 256 MiB in 1 MiB chunks, cancelled from the first progress call. */
static void test_cancel(bm_engine *e)
{
    enum { N = 256 };
    const size_t total = N * MIB;
    unsigned char *s = alloc_pattern(total, 3), *d = malloc(total);
    bm_extent x[N];
    bm_report r;
    prog p;
    volatile int stop = 0;
    make_batch(x, N, MIB, d, s, 5);
    prog_init(&p, total, &stop);
    bm_ctl c = {on_progress, &p, &stop};
    memset(&r, 0, sizeof r);
    int rc = bm_engine_copy_batch_ctl(e, x, N, &c, &r);
    CHECKF(rc == -ECANCELED && r.cancelled == 1, "cancelled batch: rc %d (%s), cancelled %d", rc, bm_strerror(rc),
           r.cancelled);
    CHECKF(r.total == total && r.bytes_done < total && p.calls >= 1,
           "cancelled batch: total %zu, bytes_done %zu, %zu progress calls", r.total, r.bytes_done, p.calls);
    CHECKF(r.extents_done < N && r.bytes_done >= r.extents_done * MIB && r.bytes_done < (r.extents_done + 1) * MIB,
           "cancelled batch: extents_done %zu does not match bytes_done %zu (1 MiB extents)", r.extents_done,
           r.bytes_done);
    size_t ed = r.extents_done < N ? r.extents_done : N;
    CHECKF(count_bad(x, 0, ed) == 0, "cancelled batch: %zu of the %zu completed extents differ", count_bad(x, 0, ed), ed);
    pthread_mutex_destroy(&p.mu);
    free(s), free(d);
}

/* Copy batches through emulated channels, registered and not: exact
 * either way; a GPU offload either works the same or says why not. */
static void test_offload(void)
{
    bm_engine_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 1, o.chunk = MIB;
    bm_engine *e = bm_engine_new_offload(&o, BM_OFFLOAD_EMULATED, 0, 2);
    CHECKF(e != NULL, "emulated offload: errno %d: %s", errno, bm_last_error());
    if (!e) return;
    size_t n = 24, each = MIB + 4 * KIB, len = n * each;
    unsigned char *s = alloc_pattern(len, 11), *d = malloc(len);
    bm_extent *ext = malloc(n * sizeof *ext);
    CHECK_EQ_INT(bm_engine_register(e, s, len), 0);
    CHECK_EQ_INT(bm_engine_register(e, d, len), 0);
    CHECK_EQ_INT(bm_engine_register(e, d + 8, 16), -EINVAL); /* overlaps */
    for (int round = 0; round < 2; round++) {
        memset(d, CANARY, len);
        make_batch(ext, n, each, d, s, 5);
        bm_report r;
        CHECK_EQ_INT(bm_engine_copy_batch_ctl(e, ext, n, NULL, &r), 0);
        CHECK_EQ_SIZE(r.bytes_done, len);
        int same = 1;
        for (size_t i = 0; i < n; i++)
            same &= memcmp(ext[i].dst, ext[i].src, each) == 0;
        CHECKF(same, "offload round %d: copies differ", round);
        /* The second round runs unregistered: all on the CPU. */
        CHECK_EQ_INT(bm_engine_unregister(e, d, len), round == 0 ? 0 : -EINVAL);
    }
    bm_engine_free(e);
    bm_engine *g = bm_engine_new_offload(NULL, BM_OFFLOAD_GPU, 0, 1);
    if (g) {
        check_note("a GPU offload is available: %s", "engine built");
        bm_engine_free(g);
    } else {
        CHECKF(errno == ENOTSUP, "no GPU: errno %d (want ENOTSUP): %s", errno, bm_last_error());
        CHECK_STR_NONEMPTY(bm_last_error());
        check_note("no GPU offload here: %s", bm_last_error());
    }
    errno = 0;
    CHECK(bm_engine_new_offload(NULL, 7, 0, 1) == NULL && errno == EINVAL);
    CHECK_EQ_INT(bm_engine_register(NULL, s, len), -EINVAL);
    free(ext), free(d), free(s);
}

int main(void)
{
    bm_engine *e0 = bm_engine_new(NULL), *e2;
    CHECKF(e0 != NULL, "bm_engine_new(NULL): errno %d: %s", errno, bm_last_error());
    if (!e0) return check_finish();
    CHECKF(bm_engine_threads(e0) >= 1, "bm_engine_threads = %zu", bm_engine_threads(e0));
    bm_engine_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2, o.placement = BM_PLACE_FILL, o.chunk = MIB;
    e2 = bm_engine_new(&o);
    CHECKF(e2 != NULL, "bm_engine_new(2 threads, fill, 1 MiB chunks): errno %d: %s", errno, bm_last_error());
    if (!e2) return check_finish();
    CHECK_EQ_SIZE(bm_engine_threads(e2), 2);

    test_options();
    test_batches(e0, "default engine");
    test_batches(e2, "2-thread engine");
    test_cancel(e2);
    test_concurrent(e0);
    test_concurrent(e2);
    test_offload();
    bm_engine_free(NULL);
    bm_engine_free(e2);
    bm_engine_free(e0);
    return check_finish();
}
