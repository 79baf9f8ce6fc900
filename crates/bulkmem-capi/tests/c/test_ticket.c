/* test_ticket.c - asynchronous engine batches: submit, poll, epoll on the
 * ticket's fd, wait with and without a timeout, cancel with an exact
 * prefix, free while running, and the argument checks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"

#define MIB ((size_t)1 << 20)

/* Never zero, so that a zero byte in a destination was never written. */
static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 31 + seed) | 1);
    return p;
}

/* n consecutive extents of `each` bytes: stream order is address order. */
static void extents(bm_extent *x, size_t n, size_t each, unsigned char *d, const unsigned char *s)
{
    for (size_t i = 0; i < n; i++) {
        x[i].dst = d + i * each;
        x[i].src = s + i * each;
        x[i].len = each;
    }
}

/* Leading bytes of d equal to s; -1 if anything after them was written. */
static long prefix(const unsigned char *d, const unsigned char *s, size_t n)
{
    size_t k = 0;
    while (k < n && d[k] == s[k])
        k++;
    for (size_t i = k; i < n; i++)
        if (d[i] != 0)
            return -1;
    return (long)k;
}

static void test_copy_and_epoll(bm_engine *e)
{
    enum { N = 16 };
    const size_t total = N * MIB;
    unsigned char *s = pattern(total, 1), *d = calloc(total, 1);
    bm_extent x[N];
    extents(x, N, MIB, d, s);
    bm_ticket *t = NULL;
    int rc = bm_engine_submit_copy(e, x, N, 0, &t);
    CHECKF(rc == 0 && t != NULL, "submit: %d (%s)", rc, bm_last_error());
    if (!t) return;
    int fd = bm_ticket_fd(t);
    CHECKF(fd >= 0, "bm_ticket_fd: %d", fd);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data = {.u64 = 7}};
    CHECK_EQ_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
    struct epoll_event got;
    /* Bounded so that a missing wake-up fails instead of hanging. */
    CHECK_EQ_INT(epoll_wait(ep, &got, 1, 60000), 1);
    CHECK(got.data.u64 == 7);
    CHECK_EQ_INT(bm_ticket_poll(t), 1);
    bm_report r;
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(bm_ticket_wait(t, 0, &r), 0);
    CHECK_EQ_SIZE(r.bytes_done, total);
    CHECK_EQ_SIZE(r.extents_done, N);
    /* The same outcome again. */
    CHECK_EQ_INT(bm_ticket_wait(t, -1, NULL), 0);
    CHECK(memcmp(d, s, total) == 0);
    bm_ticket_free(t);
    close(ep);

    /* A clear, waited on without a limit. */
    rc = bm_engine_submit_clear(e, x, N, 0, &t);
    CHECKF(rc == 0, "submit clear: %d (%s)", rc, bm_last_error());
    if (rc == 0) {
        CHECK_EQ_INT(bm_ticket_wait(t, -1, &r), 0);
        CHECK_EQ_SIZE(r.bytes_done, total);
        CHECK(prefix(d, s, total) == 0);
        bm_ticket_free(t);
    }
    free(s), free(d);
}

static void test_cancel_and_free(bm_engine *e)
{
    enum { N = 128 };
    const size_t total = N * MIB;
    unsigned char *s = pattern(total, 2), *d = calloc(total, 1);
    bm_extent x[N];
    extents(x, N, MIB, d, s);
    bm_ticket *t = NULL;
    int rc = bm_engine_submit_copy(e, x, N, 0, &t);
    CHECKF(rc == 0, "submit: %d (%s)", rc, bm_last_error());
    if (rc != 0) return;
    CHECK_EQ_INT(bm_ticket_cancel(t), 0);
    bm_report r;
    memset(&r, 0, sizeof r);
    rc = bm_ticket_wait(t, -1, &r);
    /* Cancelled at once: usually before its end; either way exact. */
    CHECKF(rc == 0 || (rc == -ECANCELED && r.cancelled == 1), "cancelled ticket: %d", rc);
    CHECKF(prefix(d, s, total) == (long)r.bytes_done, "report %zu bytes, memory %ld", r.bytes_done,
           prefix(d, s, total));
    CHECK_EQ_SIZE(r.extents_done, r.bytes_done / MIB);
    bm_ticket_free(t);

    /* Freed while running: stops and waits, so the memory can go. */
    memset(d, 0, total);
    rc = bm_engine_submit_copy(e, x, N, 0, &t);
    CHECKF(rc == 0, "submit: %d (%s)", rc, bm_last_error());
    if (rc == 0) {
        bm_ticket_free(t);
        long k = prefix(d, s, total);
        CHECKF(k >= 0 && k % 4096 == 0, "after free: prefix %ld", k);
        /* Another batch runs only once the engine is free: nothing more
         * was written meanwhile if the free waited. */
        unsigned char *snap = malloc(total);
        memcpy(snap, d, total);
        unsigned char a[4096], b[4096] = {0};
        memset(a, 5, sizeof a);
        bm_extent one = {b, a, sizeof a};
        CHECK_EQ_INT(bm_engine_copy_batch(e, &one, 1), 0);
        CHECK(memcmp(snap, d, total) == 0);
        free(snap);
    }
    free(s), free(d);
}

static void test_arguments(bm_engine *e)
{
    unsigned char a[64], b[64];
    bm_extent x[2] = {{a, b, 64}, {a + 8, b, 32}}; /* destinations overlap */
    bm_ticket *t = (bm_ticket *)1;
    CHECK_EQ_INT(bm_engine_submit_copy(e, x, 2, 0, &t), -EINVAL);
    CHECK(t == (bm_ticket *)1); /* untouched on failure */
    CHECK_EQ_INT(bm_engine_submit_copy(NULL, x, 1, 0, &t), -EINVAL);
    CHECK_EQ_INT(bm_engine_submit_copy(e, x, 1, 0, NULL), -EINVAL);
    CHECK_EQ_INT(bm_engine_submit_clear(e, x, 1, 1, &t), -EINVAL);
    CHECK_EQ_INT(bm_ticket_wait(NULL, 0, NULL), -EINVAL);
    CHECK_EQ_INT(bm_ticket_poll(NULL), -EINVAL);
    CHECK_EQ_INT(bm_ticket_fd(NULL), -EINVAL);
    CHECK_EQ_INT(bm_ticket_cancel(NULL), -EINVAL);
    bm_ticket_free(NULL);
}

int main(void)
{
    bm_engine_opts o;
    memset(&o, 0, sizeof o);
    o.threads = 2, o.chunk = MIB;
    bm_engine *e = bm_engine_new(&o);
    CHECKF(e != NULL, "bm_engine_new: errno %d: %s", errno, bm_last_error());
    if (!e) return check_finish();
    test_copy_and_epoll(e);
    test_cancel_and_free(e);
    test_arguments(e);
    bm_engine_free(e);
    return check_finish();
}
