/* test_abi.c - the promises that let the C ABI evolve: the header's
 * version macros against the library's, and bm_check_version. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bulkmem.h"
#include "check.h"

static void test_version(void)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", BULKMEM_VERSION_MAJOR, BULKMEM_VERSION_MINOR,
             BULKMEM_VERSION_PATCH);
    CHECKF(strcmp(bm_version(), want) == 0, "bm_version() \"%s\", header says \"%s\"", bm_version(), want);
    CHECK_EQ_INT(bm_version_number(), BULKMEM_VERSION_NUMBER);
    CHECK_EQ_INT(BULKMEM_VERSION_NUMBER,
                 BULKMEM_VERSION_MAJOR * 10000 + BULKMEM_VERSION_MINOR * 100 + BULKMEM_VERSION_PATCH);
    CHECK_EQ_INT(BM_CHECK_VERSION(), 0);
    CHECK_EQ_INT(bm_check_version(BULKMEM_VERSION_MAJOR, 0), 0);
    /* A program built for a newer minor than the library is refused, with
     * the reason in bm_last_error(). */
    CHECK_EQ_INT(bm_check_version(BULKMEM_VERSION_MAJOR, BULKMEM_VERSION_MINOR + 1), -ENOTSUP);
    CHECKF(strstr(bm_last_error(), "older") != NULL, "bm_last_error: %s", bm_last_error());
    CHECK_EQ_INT(bm_check_version(BULKMEM_VERSION_MAJOR + 1, 0), -ENOTSUP);
    CHECK_EQ_INT(bm_check_version(BULKMEM_VERSION_MAJOR - 1, BULKMEM_VERSION_MINOR), -ENOTSUP);
}

/* "A length of 0 is always valid and does nothing (pointers may be NULL)";
 * the handle itself is still checked. */
static void test_zero_lengths(void)
{
    bm_migrate_report mr;
    CHECK_EQ_INT(bm_fill(NULL, 0, NULL, 0), 0);
    CHECK_EQ_INT(bm_fill_with(NULL, 0, NULL, 0, NULL, NULL), 0);
    memset(&mr, 0xFF, sizeof mr);
    int rc = bm_migrate(NULL, 0, 0, &mr);
    CHECKF(rc == 0, "bm_migrate(NULL, 0): %d (%s)", rc, bm_last_error());
    CHECKF(mr.moved == 0 && mr.already == 0 && mr.not_present == 0 && mr.failed == 0,
           "bm_migrate(NULL, 0) report: %zu %zu %zu %zu", mr.moved, mr.already, mr.not_present, mr.failed);
    CHECK_EQ_INT(bm_migrate(NULL, 0, -1, NULL), -EINVAL);
    CHECK_EQ_INT(bm_mover_register(NULL, NULL, 0), -EINVAL);
    bm_mover *m = bm_mover_new();
    if (m) {
        rc = bm_mover_register(m, NULL, 0);
        CHECKF(rc == 0, "bm_mover_register(m, NULL, 0): %d (%s)", rc, bm_last_error());
        CHECK_EQ_INT(bm_mover_unregister(m, NULL, 0), 0);
        bm_mover_free(m);
    } else {
        check_note("SKIP mover: %s", bm_last_error());
    }
    bm_engine *off = bm_engine_new_offload(NULL, BM_OFFLOAD_EMULATED, 0, 1);
    CHECKF(off != NULL, "bm_engine_new_offload(EMULATED): %s", bm_last_error());
    if (off) {
        rc = bm_engine_register(off, NULL, 0);
        CHECKF(rc == 0, "bm_engine_register(off, NULL, 0): %d (%s)", rc, bm_last_error());
        CHECK_EQ_INT(bm_engine_unregister(off, NULL, 0), 0);
        CHECK_EQ_INT(bm_engine_register(off, NULL, 10), -EINVAL);
        bm_engine_free(off);
    }
    bm_engine *plain = bm_engine_new(NULL);
    CHECK(plain != NULL);
    CHECK_EQ_INT(bm_engine_register(plain, NULL, 0), -EINVAL); /* no offload */
    bm_engine_free(plain);
}

/* A cancel flag already set does not hide a bad batch: validation comes
 * first, then the flag. */
static void test_cancel_after_validation(void)
{
    enum { N = 4, LEN = 1 << 16 };
    unsigned char *s = malloc(N * LEN), *d = malloc(N * LEN);
    volatile int cancel = 1;
    bm_ctl ctl = {NULL, NULL, &cancel};
    bm_report r;
    bm_extent ext[N];
    bm_engine *e = bm_engine_new(NULL);
    CHECK(s && d && e);
    if (!s || !d || !e)
        return;
    memset(d, 0x11, N * LEN);
    for (int i = 0; i < N; i++)
        ext[i] = (bm_extent){d + i * LEN, s + i * LEN, LEN};
    ext[2].dst = d; /* overlaps extent 0 */
    memset(&r, 0xFF, sizeof r);
    int rc = bm_engine_copy_batch_ctl(e, ext, N, &ctl, &r);
    CHECKF(rc == -EINVAL, "invalid batch, cancel set: rc %d (%s)", rc, bm_strerror(rc));
    CHECKF(r.total == (size_t)N * LEN && r.bytes_done == 0 && r.extents_done == 0 && r.cancelled == 0,
           "invalid batch report: total %zu, bytes_done %zu, extents_done %zu, cancelled %d", r.total,
           r.bytes_done, r.extents_done, r.cancelled);
    /* Lengths whose sum wraps: refused, not an internal error. */
    ext[2].dst = d + 2 * LEN;
    ext[3].len = SIZE_MAX - 8;
    memset(&r, 0xFF, sizeof r);
    rc = bm_engine_clear_batch_ctl(e, ext, N, &ctl, &r);
    CHECKF(rc == -EINVAL, "wrapping batch, cancel set: rc %d (%s)", rc, bm_strerror(rc));
    CHECKF(r.bytes_done == 0 && r.cancelled == 0, "wrapping batch report: bytes_done %zu, cancelled %d",
           r.bytes_done, r.cancelled);
    ext[3].len = LEN;
    CHECK_EQ_INT(bm_engine_copy_batch_ctl(NULL, ext, N, &ctl, NULL), -EINVAL);
    /* A valid batch with the flag set is still cancelled, nothing written. */
    rc = bm_engine_copy_batch_ctl(e, ext, N, &ctl, &r);
    CHECKF(rc == -ECANCELED && r.cancelled == 1 && r.bytes_done == 0 && r.total == (size_t)N * LEN,
           "valid batch, cancel set: rc %d, cancelled %d, bytes_done %zu", rc, r.cancelled, r.bytes_done);
    int untouched = 1;
    for (size_t i = 0; i < (size_t)N * LEN; i++)
        untouched &= d[i] == 0x11;
    CHECK(untouched);
    bm_engine_free(e);
    free(s), free(d);
}

/* The error rule: a failing constructor returns NULL with errno set; a
 * failing int function returns -errno and leaves errno alone. */
static void test_error_convention(void)
{
    bm_engine_opts bad = {0, 7 /* no such placement */, 0, NULL, 0};
    errno = 0;
    bm_engine *e = bm_engine_new(&bad);
    int err = errno;
    CHECKF(e == NULL && err == EINVAL, "bm_engine_new(bad placement): %p, errno %d", (void *)e, err);
    CHECK_STR_NONEMPTY(bm_last_error());
    errno = 0;
    e = bm_engine_new_offload(NULL, 99 /* no such kind */, 0, 0);
    err = errno;
    CHECKF(e == NULL && err == EINVAL, "bm_engine_new_offload(kind 99): %p, errno %d", (void *)e, err);
    errno = 12345;
    CHECK_EQ_INT(bm_copy(NULL, NULL, 8), -EINVAL);
    CHECK_EQ_INT(errno, 12345);
}

int main(void)
{
    test_version();
    test_error_convention();
    test_zero_lengths();
    test_cancel_after_validation();
    return check_finish();
}
