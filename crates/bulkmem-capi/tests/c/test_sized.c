/* test_sized.c - the _v2 engine API: sized structs read and written by
 * their size, older and newer sizes, and cancel handles. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bulkmem.h"
#include "check.h"

#define LEN ((size_t)1 << 20)
#define N 8

static unsigned char *g_s, *g_d;
static bm_extent g_ext[N];

static void reset(void)
{
    memset(g_d, 0x11, N * LEN);
    for (int i = 0; i < N; i++)
        g_ext[i] = (bm_extent){g_d + i * LEN, g_s + i * LEN, LEN};
}

static void test_current_sizes(bm_engine *e)
{
    bm_report_v2 r = BM_REPORT_V2_INIT;
    bm_ctl_v2 c = BM_CTL_V2_INIT;
    reset();
    int rc = bm_engine_copy_batch_v2(e, g_ext, N, &c, &r);
    CHECKF(rc == 0, "copy_v2: %d (%s)", rc, bm_last_error());
    CHECK(memcmp(g_d, g_s, N * LEN) == 0);
    CHECK_EQ_SIZE(r.size, sizeof r);
    CHECK_EQ_SIZE(r.total, N * LEN);
    CHECK_EQ_SIZE(r.bytes_done, N * LEN);
    CHECK_EQ_SIZE(r.extents_done, N);
    CHECKF(r.chunks >= 1 && r.workers >= 1 && r.partial == 0 && r.offloaded == 0 && r.cancelled == 0,
           "report: chunks %zu, workers %zu, partial %d, offloaded %zu", r.chunks, r.workers, r.partial,
           r.offloaded);
    CHECK_STR_NONEMPTY(r.strategy);
    CHECK_EQ_INT(bm_engine_clear_batch_v2(e, g_ext, N, NULL, NULL), 0);
    CHECK(g_d[0] == 0 && g_d[N * LEN - 1] == 0);
}

/* An older program's report (only VER0 bytes): nothing written past it. */
static void test_older_report(bm_engine *e)
{
    unsigned char buf[sizeof(bm_report_v2) + 16];
    memset(buf, 0xAB, sizeof buf);
    size_t size = BM_REPORT_V2_SIZE_VER0;
    memcpy(buf, &size, sizeof size);
    reset();
    CHECK_EQ_INT(bm_engine_copy_batch_v2(e, g_ext, N, NULL, (bm_report_v2 *)(void *)buf), 0);
    bm_report_v2 r;
    memcpy(&r, buf, BM_REPORT_V2_SIZE_VER0);
    CHECK_EQ_SIZE(r.bytes_done, N * LEN);
    size_t past = 0;
    for (size_t i = BM_REPORT_V2_SIZE_VER0; i < sizeof buf; i++)
        past += buf[i] != 0xAB;
    CHECKF(past == 0, "%zu bytes written past an older report's size", past);
    size = 8; /* below VER0 */
    memcpy(buf, &size, sizeof size);
    CHECK_EQ_INT(bm_engine_copy_batch_v2(e, g_ext, N, NULL, (bm_report_v2 *)(void *)buf), -EINVAL);
}

/* A newer program's structs: unknown bytes zero are fine (and a report's
 * are zeroed), non-zero ones are -E2BIG. */
static void test_newer_sizes(bm_engine *e)
{
    struct {
        bm_report_v2 r;
        unsigned char more[16];
    } big;
    memset(&big, 0xAB, sizeof big);
    big.r.size = sizeof big;
    struct {
        bm_ctl_v2 c;
        unsigned char more[16];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    ctl.c.size = sizeof ctl;
    reset();
    int rc = bm_engine_copy_batch_v2(e, g_ext, N, &ctl.c, &big.r);
    CHECKF(rc == 0, "newer sizes, zero tail: %d (%s)", rc, bm_last_error());
    size_t nonzero = 0;
    for (size_t i = 0; i < sizeof big.more; i++)
        nonzero += big.more[i] != 0;
    CHECKF(nonzero == 0 && big.r.bytes_done == N * LEN && big.r.size == sizeof big,
           "newer report: %zu unknown bytes not zeroed, bytes_done %zu", nonzero, big.r.bytes_done);
    ctl.more[5] = 1;
    reset();
    rc = bm_engine_copy_batch_v2(e, g_ext, N, &ctl.c, NULL);
    CHECKF(rc == -E2BIG, "ctl with an unknown field set: %d", rc);
    CHECK(g_d[0] == 0x11); /* refused before anything ran */
    ctl.c.size = 0;
    CHECK_EQ_INT(bm_engine_copy_batch_v2(e, g_ext, N, &ctl.c, NULL), -EINVAL);
    /* An older ctl: only up to cancel. */
    ctl.c.size = BM_CTL_V2_SIZE_VER0;
    ctl.c.cancel_handle = (bm_cancel *)(void *)&ctl; /* past its size: ignored */
    CHECK_EQ_INT(bm_engine_copy_batch_v2(e, g_ext, N, &ctl.c, NULL), 0);

    struct {
        bm_engine_opts_v2 o;
        unsigned char more[8];
    } opts;
    memset(&opts, 0, sizeof opts);
    opts.o.size = sizeof opts;
    opts.o.threads = 2;
    bm_engine *e2 = bm_engine_new_v2(&opts.o);
    CHECKF(e2 != NULL && bm_engine_threads(e2) == 2, "new_v2, zero tail: %s", bm_last_error());
    bm_engine_free(e2);
    opts.more[0] = 1;
    errno = 0;
    e2 = bm_engine_new_v2(&opts.o);
    CHECKF(e2 == NULL && errno == E2BIG, "new_v2, unknown field set: %p, errno %d", (void *)e2, errno);
    opts.o.size = 4;
    errno = 0;
    e2 = bm_engine_new_v2(&opts.o);
    CHECKF(e2 == NULL && errno == EINVAL, "new_v2, size 4: errno %d", errno);
    bm_engine_opts_v2 bad = BM_ENGINE_OPTS_V2_INIT;
    bad.placement = 9;
    errno = 0;
    CHECK(bm_engine_new_v2(&bad) == NULL && errno == EINVAL);
}

static void test_cancel_handle(bm_engine *e)
{
    bm_cancel *c = bm_cancel_new();
    bm_ctl_v2 ctl = BM_CTL_V2_INIT;
    bm_report_v2 r = BM_REPORT_V2_INIT;
    CHECK(c != NULL);
    ctl.cancel_handle = c;
    reset();
    CHECK_EQ_INT(bm_engine_copy_batch_v2(e, g_ext, N, &ctl, &r), 0); /* not set yet */
    CHECK_EQ_INT(bm_cancel_set(c), 0);
    reset();
    int rc = bm_engine_copy_batch_v2(e, g_ext, N, &ctl, &r);
    CHECKF(rc == -ECANCELED && r.cancelled == 1 && r.bytes_done == 0 && g_d[0] == 0x11,
           "handle set: rc %d, cancelled %d, bytes_done %zu", rc, r.cancelled, r.bytes_done);
    CHECK_EQ_INT(bm_cancel_set(NULL), -EINVAL);
    bm_cancel_free(c);
    bm_cancel_free(NULL);
}

int main(void)
{
    g_s = malloc(N * LEN), g_d = malloc(N * LEN);
    if (!g_s || !g_d)
        return 2;
    for (size_t i = 0; i < N * LEN; i++)
        g_s[i] = (unsigned char)(i * 7 + 3);
    bm_engine_opts_v2 o = BM_ENGINE_OPTS_V2_INIT;
    o.chunk = 256 << 10;
    bm_engine *e = bm_engine_new_v2(&o);
    CHECKF(e != NULL, "bm_engine_new_v2: %s", bm_last_error());
    if (!e)
        return check_finish();
    CHECK_EQ_SIZE(sizeof(bm_ctl_v2) > BM_CTL_V2_SIZE_VER0, 1);
    test_current_sizes(e);
    test_older_report(e);
    test_newer_sizes(e);
    test_cancel_handle(e);
    bm_engine_free(e);
    free(g_s), free(g_d);
    return check_finish();
}
