/* test_api.c - every bulkmem.h function but the engine and checked ones. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"

#define CANARY 0x5A
#define GUARD 64
#define MIB ((size_t)1 << 20)
#define CAP (8 * MIB + 4096)

static unsigned char *g_src, *g_dst;

/* Names that cannot do an operation (bm_copy_with / bm_clear_with: -EINVAL). */
static const char *const no_copy[] = {"rep-stosq", "rep-stosb", "clzero", NULL};
static const char *const no_clear[] = {"rep-movsq", "rep-movsb", "rep-movsb-or-avx2", NULL};

static int in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (strcmp(*l, s) == 0)
            return 1;
    return 0;
}

static int all_eq(const unsigned char *p, size_t n, unsigned char b)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != b)
            return 0;
    return 1;
}

static void pattern(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (unsigned char)(x >> 7);
    }
}

static int has_word(const char *s, const char *w) /* case-insensitive */
{
    size_t n = strlen(w);
    for (; s && *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && tolower((unsigned char)s[i]) == w[i])
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

enum { K_PLAIN, K_HINT, K_WITH };
typedef struct { int kind, hint; const char *strat; } variant;

static int run_op(int op, const variant *v, void *d, const void *s, size_t n)
{
    if (op == BM_OP_COPY)
        return v->kind == K_PLAIN ? bm_copy(d, s, n)
             : v->kind == K_HINT  ? bm_copy_hint(d, s, n, v->hint)
                                  : bm_copy_with(v->strat, d, s, n);
    return v->kind == K_PLAIN ? bm_clear(d, n)
         : v->kind == K_HINT  ? bm_clear_hint(d, n, v->hint)
                              : bm_clear_with(v->strat, d, n);
}

static void label(const variant *v, int op, char *buf, size_t cap)
{
    const char *f = op == BM_OP_COPY ? "copy" : "clear";
    if (v->kind == K_PLAIN) snprintf(buf, cap, "bm_%s", f);
    else if (v->kind == K_HINT) snprintf(buf, cap, "bm_%s_hint(hint %d)", f, v->hint);
    else snprintf(buf, cap, "bm_%s_with(\"%s\")", f, v->strat ? v->strat : "(NULL)");
}

/* One call at src+sa -> dst+da; checks result and untouched guards, then
 * restores the destination canary. Returns the rc, or 1000 for bad bytes. */
static int one_case(int op, const variant *v, size_t len, size_t sa, size_t da)
{
    unsigned char *d = g_dst + da;
    const unsigned char *s = g_src + sa;
    int rc = run_op(op, v, d, s, len);
    if (rc == 0 && !(all_eq(g_dst, da, CANARY) && all_eq(d + len, GUARD, CANARY) &&
                     (op == BM_OP_COPY ? memcmp(d, s, len) == 0 : all_eq(d, len, 0))))
        rc = 1000;
    memset(g_dst, CANARY, da + len + GUARD);
    return rc;
}

static void sweep(int op, const variant *v, int grid)
{
    static const size_t big[] = {65536 + 1, 2 * MIB + 17, 8 * MIB - 3};
    static const size_t gl[] = {0, 1, 7, 63, 64, 65, 255, 4095, 4096, 4097};
    char name[96], first[96] = "";
    size_t bad = 0, cases = 0;
    int rc;
    label(v, op, name, sizeof name);
#define CASE(L, SA, DA)                                                                 \
    do {                                                                                \
        cases++;                                                                        \
        if ((rc = one_case(op, v, (L), (SA), (DA))) != 0 && bad++ == 0)                 \
            snprintf(first, sizeof first, "len %zu src+%zu dst+%zu: %s", (size_t)(L),    \
                     (size_t)(SA), (size_t)(DA), rc == 1000 ? "wrong bytes" : bm_strerror(rc)); \
    } while (0)
    for (size_t len = 0; len <= 4200; len++)
        CASE(len, op == BM_OP_COPY ? (len * 13) % 64 : 0, (len * 29 + 7) % 64);
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        CASE(big[i], 0, 0);
        CASE(big[i], 5, 63);
        CASE(big[i], 63, 1);
    }
    if (grid)
        for (size_t g = 0; g < sizeof gl / sizeof gl[0]; g++)
            for (size_t sa = 0; sa < (op == BM_OP_COPY ? 64u : 1u); sa++)
                for (size_t da = 0; da < 64; da++)
                    CASE(gl[g], sa, da);
#undef CASE
    CHECKF(bad == 0, "%s: %zu of %zu cases failed, first: %s", name, bad, cases, first);
}

static void test_version_errors(void)
{
    const char *v0 = bm_version(), *v = v0 ? v0 : "", *p;
    int parts = 0, ok = 1;
    CHECK_STR_NONEMPTY(v0);
    for (p = v; ok && parts < 3; parts++) {
        if (!isdigit((unsigned char)*p)) ok = 0;
        while (isdigit((unsigned char)*p)) p++;
        if (parts < 2) { if (*p == '.') p++; else ok = 0; }
    }
    CHECKF(ok && (*p == '\0' || *p == '-' || *p == '+'), "bm_version() \"%s\" is not N.N.N", v);

    const char *e[4] = {bm_strerror(0), bm_strerror(-EINVAL), bm_strerror(-ENOTSUP), bm_strerror(-EIO)};
    for (int i = 0; i < 4; i++) {
        CHECKF(e[i] && e[i][0], "bm_strerror #%d (0, -EINVAL, -ENOTSUP, -EIO) is empty", i);
        for (int j = 0; j < i; j++)
            CHECKF(e[i] && e[j] && strcmp(e[i], e[j]) != 0, "bm_strerror #%d and #%d are both \"%s\"", j, i, e[i] ? e[i] : "");
    }
    CHECK_STR_NONEMPTY(bm_strerror(-12345));
    CHECK_STR_NONEMPTY(bm_strerror(-ENOTRECOVERABLE));

    CHECK_EQ_INT(bm_copy_hint(g_dst, g_src, 16, 7), -EINVAL);
    CHECKF(has_word(bm_last_error(), "hint"), "bm_last_error after a bad hint: \"%s\"", bm_last_error());
    CHECK_EQ_INT(bm_copy_with("avx3", g_dst, g_src, 16), -EINVAL);
    CHECKF(has_word(bm_last_error(), "avx3"), "bm_last_error after \"avx3\": \"%s\"", bm_last_error());
}

static void test_single(void)
{
    unsigned char b[256], ref[256];
    variant vs[6] = {{K_PLAIN, 0, NULL}, {K_HINT, BM_HINT_AUTO, NULL}, {K_HINT, BM_HINT_REUSE, NULL},
                     {K_HINT, BM_HINT_STREAM, NULL}, {K_WITH, 0, "auto"}, {K_WITH, 0, NULL}};
    char name[96];
    for (int op = BM_OP_COPY; op <= BM_OP_CLEAR; op++)
        for (int i = 0; i < 6; i++) {
            const variant *v = &vs[i];
            label(v, op, name, sizeof name);
            sweep(op, v, v->kind == K_PLAIN);
            CHECKF(run_op(op, v, NULL, NULL, 0) == 0, "%s: len 0 with NULL pointers", name);
            CHECKF(run_op(op, v, NULL, g_src, 16) == -EINVAL, "%s: NULL dst, len 16", name);
            if (op == BM_OP_COPY) {
                CHECKF(run_op(op, v, g_dst, NULL, 16) == -EINVAL, "%s: NULL src, len 16", name);
                pattern(b, sizeof b, 9);
                memcpy(ref, b, sizeof b);
                CHECKF(run_op(op, v, b + 10, b, 100) == -EINVAL, "%s: dst overlaps src ahead", name);
                CHECKF(run_op(op, v, b, b + 10, 100) == -EINVAL, "%s: src overlaps dst ahead", name);
                CHECKF(run_op(op, v, b, b, 100) == -EINVAL, "%s: dst == src", name);
                CHECKF(memcmp(b, ref, sizeof b) == 0, "%s: a refused overlapping copy wrote", name);
            }
        }
    memset(g_dst, CANARY, 64);
    CHECK_EQ_INT(bm_copy_hint(g_dst, g_src, 16, 7), -EINVAL);
    CHECK_EQ_INT(bm_copy_hint(g_dst, g_src, 16, -1), -EINVAL);
    CHECK_EQ_INT(bm_clear_hint(g_dst, 16, 7), -EINVAL);
    CHECK_EQ_INT(bm_clear_with("avx3", g_dst, 16), -EINVAL);
    CHECK(all_eq(g_dst, 64, CANARY));
}

static void test_strategies(void)
{
    size_t n = 0;
    int saw_pp = 0, saw_movsb = 0;
    CHECKF(bm_strategy_name(0) && strcmp(bm_strategy_name(0), "auto") == 0, "bm_strategy_name(0) is not \"auto\"");
    CHECK_EQ_INT(bm_strategy_available("avx3"), -EINVAL);
    CHECK_EQ_INT(bm_strategy_available("per-page"), 1);
    CHECK_EQ_INT(bm_strategy_available("auto"), 1);
    CHECK_EQ_INT(bm_strategy_available(NULL), -EINVAL);
    CHECK_EQ_INT(bm_strategy_supports("clzero", BM_OP_COPY), 0);
    CHECK_EQ_INT(bm_strategy_supports("clzero", BM_OP_CLEAR), 1);
    CHECK_EQ_INT(bm_strategy_supports("avx3", BM_OP_COPY), -EINVAL);
    CHECK_EQ_INT(bm_strategy_supports(NULL, BM_OP_COPY), -EINVAL);
    CHECK_EQ_INT(bm_strategy_supports("avx2", 7), -EINVAL);
    for (const char *s; (s = bm_strategy_name(n)) != NULL && n < 1000; n++) {
        int avail = bm_strategy_available(s);
        CHECKF(s[0] && (avail == 0 || avail == 1), "strategy %zu \"%s\": available %d", n, s, avail);
        for (size_t j = 0; j < n; j++)
            CHECKF(strcmp(bm_strategy_name(j), s) != 0, "strategy \"%s\" listed twice", s);
        saw_pp |= strcmp(s, "per-page") == 0;
        saw_movsb |= strcmp(s, "rep-movsb") == 0;
        for (int op = BM_OP_COPY; op <= BM_OP_CLEAR; op++) {
            variant v = {K_WITH, 0, s};
            int able = !in_list(op == BM_OP_COPY ? no_copy : no_clear, s), rc;
            CHECKF(bm_strategy_supports(s, op) == able, "bm_strategy_supports(\"%s\", %d) = %d, want %d", s, op,
                   bm_strategy_supports(s, op), able);
            if (able && avail == 1) { sweep(op, &v, 0); continue; }
            memset(g_dst, CANARY, 64);
            rc = run_op(op, &v, g_dst, g_src, 64);
            CHECKF(rc == (able ? -ENOTSUP : -EINVAL) && all_eq(g_dst, 64, CANARY),
                   "%s with \"%s\" (available %d): got %d, want %d, nothing written", op ? "clear" : "copy",
                   s, avail, rc, able ? -ENOTSUP : -EINVAL);
        }
    }
    CHECKF(n >= 10, "only %zu strategy names", n);
    CHECKF(saw_pp && saw_movsb, "per-page and rep-movsb must be listed");

    const char *c = bm_auto_choice(BM_OP_COPY, 4096, 1, BM_HINT_AUTO);
    int listed = 0;
    for (size_t i = 0; c && bm_strategy_name(i); i++)
        listed |= strcmp(bm_strategy_name(i), c) == 0;
    CHECKF(c && listed && !in_list(no_copy, c) && bm_strategy_available(c) == 1,
           "bm_auto_choice(copy, 4096) = \"%s\" is not a listed, available copy strategy", c ? c : "(NULL)");
    CHECK(bm_auto_choice(BM_OP_CLEAR, (size_t)1 << 30, 512, BM_HINT_STREAM) != NULL);
    CHECK(bm_auto_choice(5, 4096, 1, BM_HINT_AUTO) == NULL);
    CHECK(bm_auto_choice(BM_OP_COPY, 4096, 1, 9) == NULL);
    int t = bm_is_tuned();
    CHECKF(t == 0 || t == 1, "bm_is_tuned() = %d", t);
    CHECK_STR_NONEMPTY(bm_profile_status());
}

#define NEXT 64
#define SLOT 32768
static void make_batch(bm_extent *e, unsigned char *bd, const unsigned char *bs)
{
    size_t perm[NEXT];
    for (size_t i = 0; i < NEXT; i++) perm[i] = i;
    for (size_t i = NEXT - 1; i > 0; i--) {
        size_t j = (i * 7919 + 13) % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < NEXT; i++) {
        e[i].len = i % 9 == 4 ? 0 : i % 5 == 0 ? i + 1 : (i * i * 131 + i * 17) % 30000 + 1;
        e[i].dst = bd + perm[i] * SLOT + (i * 5) % 64;
        e[i].src = bs + (i * 104729) % (MIB - SLOT);
    }
    e[13].dst = NULL, e[13].src = NULL, e[13].len = 0;
}

static void test_batches(void)
{
    bm_extent e[NEXT], bad[NEXT];
    size_t sz = NEXT * SLOT;
    unsigned char *bd = g_dst, *ref = malloc(sz), *bs = g_src;
    make_batch(e, bd, bs);
    for (int op = BM_OP_COPY; op <= BM_OP_CLEAR; op++) {
        const char *f = op == BM_OP_COPY ? "bm_copy_batch" : "bm_clear_batch";
        int (*fn)(const bm_extent *, size_t) = op == BM_OP_COPY ? bm_copy_batch : bm_clear_batch;
        memset(bd, CANARY, sz), memset(ref, CANARY, sz);
        for (size_t i = 0; i < NEXT; i++)
            if (e[i].len) {
                unsigned char *r = ref + ((unsigned char *)e[i].dst - bd);
                if (op == BM_OP_COPY) memcpy(r, e[i].src, e[i].len);
                else memset(r, 0, e[i].len);
            }
        CHECKF(fn(e, NEXT) == 0 && memcmp(bd, ref, sz) == 0, "%s: 64 scattered extents", f);
        CHECKF(fn(NULL, 0) == 0 && fn(e, 0) == 0, "%s: n == 0", f);
        CHECKF(fn(NULL, 3) == -EINVAL, "%s: NULL extents, n 3", f);
        memset(bd, CANARY, sz);
#define REFUSED(what, edit)                                                                 \
        do {                                                                                \
            memcpy(bad, e, sizeof e);                                                       \
            edit;                                                                           \
            int rc_ = fn(bad, NEXT);                                                        \
            CHECKF(rc_ == -EINVAL && all_eq(bd, sz, CANARY), "%s: %s: rc %d (want -EINVAL), " \
                   "destination %s", f, what, rc_, all_eq(bd, sz, CANARY) ? "untouched" : "WRITTEN"); \
        } while (0)
        REFUSED("extent 3 dst NULL", bad[3].dst = NULL);
        REFUSED("extent 41 dst overlaps extent 6 dst", bad[41].dst = (unsigned char *)bad[6].dst + 1);
        CHECKF(has_word(bm_last_error(), "overlap"), "%s: bm_last_error after overlap: \"%s\"", f, bm_last_error());
        if (op == BM_OP_COPY) {
            REFUSED("extent 3 src NULL", bad[3].src = NULL);
            REFUSED("extent 7 dst overlaps its own src", bad[7].src = (unsigned char *)bad[7].dst + 3);
            REFUSED("extent 50 dst overlaps extent 20 src", bad[50].dst = (void *)bad[20].src);
        }
#undef REFUSED
    }
    free(ref);
}

typedef struct { size_t calls, next, disorder, badlen; } patch_ctx;
static void patch(size_t index, void *elem, size_t elem_len, void *ctx)
{
    patch_ctx *c = ctx;
    uint64_t v = index;
    c->calls++;
    if (index != c->next++) c->disorder++;
    if (elem_len != 64) c->badlen++;
    else memcpy(elem, &v, 8);
}

static void test_nt_drain(const unsigned char *t);

static void test_fill(void)
{
    unsigned char t[64];
    static const size_t sizes[] = {64 * 1024, 64 * MIB};
    for (int i = 0; i < 64; i++) t[i] = (unsigned char)(i * 3 + 1);
    for (size_t k = 0; k < 2; k++) {
        size_t len = sizes[k], n = len / 64, bad = 0;
        unsigned char *b = malloc(len + GUARD);
        for (int w = 0; w < 2; w++) {
            patch_ctx c = {0, 0, 0, 0};
            memset(b, CANARY, len + GUARD);
            int rc = w ? bm_fill_with(b, len, t, 64, patch, &c) : bm_fill(b, len, t, 64);
            bad = 0;
            for (size_t j = 0; j < n; j++) {
                uint64_t ix;
                memcpy(&ix, b + j * 64, 8);
                bad += w ? (ix != j || memcmp(b + j * 64 + 8, t + 8, 56) != 0) : memcmp(b + j * 64, t, 64) != 0;
            }
            CHECKF(rc == 0 && bad == 0 && all_eq(b + len, GUARD, CANARY), "%s over %zu bytes: rc %d, %zu bad elements",
                   w ? "bm_fill_with" : "bm_fill", len, rc, bad);
            if (w)
                CHECKF(c.calls == n && c.disorder == 0 && c.badlen == 0,
                       "bm_fill_with callback over %zu: %zu calls (want %zu), %zu out of order, %zu bad elem_len",
                       len, c.calls, n, c.disorder, c.badlen);
        }
        free(b);
    }
    unsigned char b[256];
    patch_ctx c = {0, 0, 0, 0};
    memset(b, CANARY, sizeof b);
    CHECKF(bm_fill(b, 100, t, 64) == -EINVAL, "bm_fill: len 100 with a 64-byte template");
    CHECKF(bm_fill(b, 64, t, 0) == -EINVAL, "bm_fill: template length 0");
    CHECKF(bm_fill(b, 64, NULL, 64) == -EINVAL, "bm_fill: NULL template");
    CHECKF(bm_fill(NULL, 64, t, 64) == -EINVAL, "bm_fill: NULL dst");
    CHECKF(bm_fill_with(b, 100, t, 64, patch, &c) == -EINVAL, "bm_fill_with: len 100, template 64");
    CHECKF(bm_fill_with(b, 64, t, 0, patch, &c) == -EINVAL, "bm_fill_with: template length 0");
    CHECKF(all_eq(b, sizeof b, CANARY) && c.calls == 0, "refused fills wrote (or called the patch %zu times)", c.calls);
    CHECKF(bm_fill(NULL, 0, t, 64) == 0, "bm_fill: len 0 with NULL dst");
    test_nt_drain(t);
}

/* Another thread streams a 4 MiB fill (non-temporal stores), drains, and
 * publishes with a release store; this thread acquires and must see every
 * byte. bm_nt_drain also works on a thread that never called bulkmem and
 * leaves errno and bm_last_error() alone. */
typedef struct {
    unsigned char *buf;
    const unsigned char *tmpl;
    size_t len;
    int rc, errno_after;
    int ready;
} drain_job;

static void *drain_thread(void *arg)
{
    drain_job *j = arg;
    errno = 4321;
    bm_nt_drain(); /* first bulkmem call of this thread */
    j->errno_after = errno;
    j->rc = bm_fill(j->buf, j->len, j->tmpl, 64);
    bm_nt_drain();
    __atomic_store_n(&j->ready, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_nt_drain(const unsigned char *t)
{
    drain_job j = {malloc(4 * MIB), t, 4 * MIB, -1, 0, 0};
    pthread_t th;
    CHECK(j.buf != NULL);
    if (!j.buf)
        return;
    memset(j.buf, CANARY, j.len);
    CHECK_EQ_INT(bm_fill(NULL, 64, t, 64), -EINVAL); /* leaves a last error */
    char before[128];
    snprintf(before, sizeof before, "%s", bm_last_error());
    errno = 777;
    bm_nt_drain();
    CHECK_EQ_INT(errno, 777);
    CHECKF(strcmp(before, bm_last_error()) == 0, "bm_nt_drain changed bm_last_error: %s", bm_last_error());
    CHECK_EQ_INT(pthread_create(&th, NULL, drain_thread, &j), 0);
    while (!__atomic_load_n(&j.ready, __ATOMIC_ACQUIRE))
        sched_yield();
    size_t bad = 0;
    for (size_t i = 0; i < j.len; i += 64)
        bad += memcmp(j.buf + i, t, 64) != 0;
    pthread_join(th, NULL);
    CHECKF(j.rc == 0 && bad == 0, "fill on another thread: rc %d, %zu elements not seen", j.rc, bad);
    CHECK_EQ_INT(j.errno_after, 4321);
    free(j.buf);
}

static void test_mover(void)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 16 * pg;
    bm_move_report r;
    bm_mover_free(NULL);
    errno = 0;
    bm_mover *m = bm_mover_new();
    if (!m) {
        int err = errno;
        CHECKF(err == ENOTSUP || err == EPERM, "bm_mover_new: NULL with errno %d (%s)", err, strerror(err));
        check_note("SKIP mover: bm_mover_new failed: %s (%s)", strerror(err), bm_last_error());
        return;
    }
    unsigned char *s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *d = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *ref = malloc(len);
    CHECK(s != MAP_FAILED && d != MAP_FAILED && ref);
    pattern(s, len, 77);
    memcpy(ref, s, len);
    memset(&r, 0xFF, sizeof r);
    CHECK_EQ_INT(bm_mover_register(m, d, len), 0);
    int rc = bm_mover_move(m, d, s, len, 0, &r);
    CHECKF(rc == 0, "bm_mover_move: rc %d (%s): %s", rc, bm_strerror(rc), bm_last_error());
    CHECK_EQ_SIZE(r.moved, len); /* 16 pages */
    CHECK_EQ_SIZE(r.failures, 0);
    CHECKF(memcmp(d, ref, len) == 0, "bm_mover_move: destination lacks the source's pattern");
    CHECK_EQ_INT(bm_mover_move(m, d, s + 1, pg, 0, NULL), -EINVAL);
    CHECK_EQ_INT(bm_mover_unregister(m, d, len), 0);
    bm_mover_free(m);
    munmap(s, len), munmap(d, len), free(ref);
}

static void test_numa(void)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 16 * pg;
    int nodes = bm_numa_nodes();
    bm_migrate_report r;
    CHECKF(nodes >= 1, "bm_numa_nodes() = %d", nodes);
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    memset(p, 0x3C, len);
    if (nodes >= 1) {
        memset(&r, 0, sizeof r);
        int rc = bm_migrate(p, len, 0, &r);
        if (rc == -EPERM || rc == -ENOSYS) {
            check_note("SKIP migrate to node 0: %s (%s)", bm_strerror(rc), bm_last_error());
        } else {
            CHECKF(rc == 0, "bm_migrate to node 0: rc %d (%s): %s", rc, bm_strerror(rc), bm_last_error());
            CHECKF(r.already + r.moved == 16, "bm_migrate: already %zu + moved %zu != 16 (not present %zu, failed %zu)",
                   r.already, r.moved, r.not_present, r.failed);
            CHECK(all_eq(p, len, 0x3C));
        }
    }
    CHECK_EQ_INT(bm_migrate(p, len, 9999, &r), -ENODEV);
    CHECK_EQ_INT(bm_migrate(p + 1, pg, 0, NULL), -EINVAL);
    munmap(p, len);
}

int main(void)
{
    g_src = malloc(CAP), g_dst = malloc(CAP);
    if (!g_src || !g_dst) return 2;
    pattern(g_src, CAP, 1);
    memset(g_dst, CANARY, CAP);
    test_version_errors();
    test_single();
    test_strategies();
    test_batches();
    test_fill();
    test_mover();
    test_numa();
    free(g_src), free(g_dst);
    return check_finish();
}
