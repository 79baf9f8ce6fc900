/* test_checked.c - bm_copy_checked / bm_clear_checked, with real SIGBUS faults
 * from a MAP_SHARED file mapping truncated under the caller, and SIGSEGV
 * faults from a PROT_NONE page. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"

#define PAGES 16
#define EOF_PAGES 5

static size_t pg;

static int all_eq(const unsigned char *p, size_t n, unsigned char b)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != b)
            return 0;
    return 1;
}

static void pattern(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i * 131 + (i >> 12) * 7 + 1) & 0xFF);
}

static void reset_fault(bm_fault *f)
{
    memset(f, 0x77, sizeof *f);
}

/* The fault fields, for failure notes. */
static const char *fstr(const bm_fault *f)
{
    static char buf[160];
    snprintf(buf, sizeof buf, "offset %zu, addr %p, side %d, code %d", f->offset, f->addr, f->side,
             f->code);
    return buf;
}

/* Returns 0 to skip the fault tests (checked copies unsupported here). */
static int test_normal(void)
{
    size_t len = 3 * pg + 123;
    unsigned char *s = malloc(len), *d = malloc(len);
    bm_fault f;
    pattern(s, len);
    memset(d, 0xAA, len);
    reset_fault(&f);
    int rc = bm_copy_checked(d, s, len, &f);
    if (rc == -ENOTSUP) {
        check_note("SKIP checked copies: %s (%s)", bm_strerror(rc), bm_last_error());
        free(s), free(d);
        return 0;
    }
    CHECKF(rc == 0 && memcmp(d, s, len) == 0, "bm_copy_checked of %zu plain bytes: rc %d", len, rc);
    rc = bm_copy_checked(d + 1, s + 3, len - 3, NULL);
    CHECKF(rc == 0 && memcmp(d + 1, s + 3, len - 3) == 0, "bm_copy_checked misaligned, f NULL: rc %d", rc);
    rc = bm_clear_checked(d + 5, len - 10, &f);
    CHECKF(rc == 0 && all_eq(d + 5, len - 10, 0) && d[4] == s[6] && d[len - 5] == s[len - 3],
           "bm_clear_checked of %zu plain bytes: rc %d", len - 10, rc);
    CHECK_EQ_INT(bm_clear_checked(d, len, NULL), 0);
    CHECK(all_eq(d, len, 0));

    CHECK_EQ_INT(bm_copy_checked(NULL, s, 16, &f), -EINVAL);
    CHECK_EQ_INT(bm_copy_checked(d, NULL, 16, &f), -EINVAL);
    CHECK_EQ_INT(bm_clear_checked(NULL, 16, &f), -EINVAL);
    CHECK_EQ_INT(bm_copy_checked(NULL, NULL, 0, &f), 0);
    CHECK_EQ_INT(bm_clear_checked(NULL, 0, NULL), 0);
    memcpy(d, s, len);
    CHECK_EQ_INT(bm_copy_checked(d + 8, d, 64, &f), -EINVAL); /* overlapping */
    CHECK(memcmp(d, s, len) == 0);
    free(s), free(d);
    return 1;
}

/* Checks a fault report against what the truncation at EOF_PAGES implies. */
static void check_fault(const char *what, int rc, const bm_fault *f, size_t want_off, int side,
                        const unsigned char *eof)
{
    CHECKF(rc == -EIO, "%s: rc %d (%s), want -EIO", what, rc, bm_strerror(rc));
    CHECKF(f->offset == want_off, "%s: fault offset %zu, want %zu (%s)", what, f->offset, want_off, fstr(f));
    CHECKF(f->side == side, "%s: fault side %d, want %d", what, f->side, side);
    CHECKF(f->code == 2, "%s: fault code %d, want BUS_ADRERR (2)", what, f->code);
    CHECKF((const unsigned char *)f->addr >= eof && (const unsigned char *)f->addr < eof + pg,
           "%s: fault addr %p outside the first page past EOF %p", what, f->addr, (const void *)eof);
    CHECKF(bm_last_error()[0] != '\0', "%s: bm_last_error() is empty after a fault", what);
}

static void test_faults(void)
{
    size_t len = PAGES * pg, eof = EOF_PAGES * pg;
    char path[] = "/tmp/bulkmem-checked-XXXXXX";
    unsigned char *pat = malloc(len), *d = malloc(len);
    bm_fault f;
    int rc, fd = mkstemp(path);
    if (fd < 0 || !pat || !d) {
        CHECKF(0, "mkstemp %s: %s", path, strerror(errno));
        free(pat), free(d);
        return;
    }
    unlink(path);
    CHECK_EQ_INT(ftruncate(fd, (off_t)len), 0);
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        CHECKF(0, "mmap of the temp file: %s", strerror(errno));
        close(fd), free(pat), free(d);
        return;
    }
    pattern(pat, len);
    memcpy(m, pat, len);
    CHECK_EQ_INT(ftruncate(fd, (off_t)eof), 0); /* pages EOF_PAGES.. now SIGBUS */

    /* Source faults. */
    memset(d, 0xAA, len);
    reset_fault(&f);
    rc = bm_copy_checked(d, m, len, &f);
    check_fault("copy from truncated file", rc, &f, eof, BM_FAULT_SRC, m + eof);
    CHECKF(memcmp(d, pat, eof) == 0, "copy from truncated file: bytes before EOF differ from the file");
    CHECKF(all_eq(d + eof, len - eof, 0xAA), "copy from truncated file: bytes after the fault were written");

    memset(d, 0xAA, len);
    reset_fault(&f);
    rc = bm_copy_checked(d, m + 100, len - 100, &f);
    check_fault("copy from truncated file at +100", rc, &f, eof - 100, BM_FAULT_SRC, m + eof);
    CHECKF(memcmp(d, pat + 100, eof - 100) == 0, "copy at +100: bytes before the fault differ");
    CHECKF(all_eq(d + eof - 100, len - eof + 100, 0xAA), "copy at +100: bytes after the fault were written");

    memset(d, 0xAA, len);
    rc = bm_copy_checked(d, m, len, NULL);
    CHECKF(rc == -EIO && memcmp(d, pat, eof) == 0, "copy from truncated file with f NULL: rc %d", rc);

    /* Destination faults: copy into the mapping, then clear it. */
    unsigned char *s = malloc(len);
    for (size_t i = 0; i < len; i++)
        s[i] = (unsigned char)~pat[i];
    reset_fault(&f);
    rc = bm_copy_checked(m, s, len, &f);
    check_fault("copy into truncated file", rc, &f, eof, BM_FAULT_DST, m + eof);
    CHECKF(memcmp(m, s, eof) == 0, "copy into truncated file: bytes before EOF are not the copy");

    reset_fault(&f);
    rc = bm_clear_checked(m, len, &f);
    check_fault("clear of truncated file", rc, &f, eof, BM_FAULT_DST, m + eof);
    CHECKF(all_eq(m, eof, 0), "clear of truncated file: the first %d pages are not zero", EOF_PAGES);

    memcpy(m, pat, eof);
    reset_fault(&f);
    rc = bm_clear_checked(m + 100, len - 100, &f);
    check_fault("clear of truncated file at +100", rc, &f, eof - 100, BM_FAULT_DST, m + eof);
    CHECKF(memcmp(m, pat, 100) == 0 && all_eq(m + 100, eof - 100, 0),
           "clear at +100: wrong bytes before the fault");
    CHECK_EQ_INT(bm_clear_checked(m, len, NULL), -EIO);

    /* Still alive, and ordinary checked calls still work. */
    memset(d, 0xAA, len);
    CHECK_EQ_INT(bm_copy_checked(d, s, eof, &f), 0);
    CHECK(memcmp(d, s, eof) == 0);
    munmap(m, len);
    close(fd);
    free(s), free(pat), free(d);
}

/* A length-0 checked call installs bulkmem's handler for both signals, as
 * bulkmem.h tells programs that want it in front of theirs. */
static void test_zero_length_installs(void)
{
    struct sigaction bus, segv;
    CHECK_EQ_INT(bm_copy_checked(NULL, NULL, 0, NULL), 0);
    sigaction(SIGBUS, NULL, &bus);
    sigaction(SIGSEGV, NULL, &segv);
    CHECKF(bus.sa_handler != SIG_DFL && segv.sa_handler != SIG_DFL,
           "a length-0 checked call left SIGBUS (%p) or SIGSEGV (%p) at the default",
           (void *)bus.sa_handler, (void *)segv.sa_handler);
}

/* A PROT_NONE page (SIGSEGV) stops a checked copy with -EFAULT. */
static void test_protected(void)
{
    size_t len = 6 * pg;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *d = malloc(len);
    bm_fault f;
    if (m == MAP_FAILED || !d) {
        CHECKF(0, "mmap: %s", strerror(errno));
        return;
    }
    pattern(m, len);
    CHECK_EQ_INT(mprotect(m + 4 * pg, pg, PROT_NONE), 0);
    memset(d, 0xAA, len);
    reset_fault(&f);
    int rc = bm_copy_checked(d, m + 10, len - 10, &f);
    CHECKF(rc == -EFAULT, "copy from a protected page: rc %d (%s), want -EFAULT", rc, bm_strerror(rc));
    CHECKF(f.offset == 4 * pg - 10 && f.side == BM_FAULT_SRC && f.code == 2 /* SEGV_ACCERR */,
           "copy from a protected page: %s", fstr(&f));
    CHECKF((unsigned char *)f.addr >= m + 4 * pg && (unsigned char *)f.addr < m + 5 * pg,
           "copy from a protected page: fault addr %p", f.addr);
    CHECKF(memcmp(d, m + 10, 4 * pg - 10) == 0, "copy from a protected page: wrong prefix");
    reset_fault(&f);
    rc = bm_clear_checked(m + pg, len - pg, &f);
    CHECKF(rc == -EFAULT && f.offset == 3 * pg && f.side == BM_FAULT_DST,
           "clear of a protected page: rc %d, %s", rc, fstr(&f));
    CHECK(all_eq(m + pg, 3 * pg, 0));
    munmap(m, len);
    free(d);
}

int main(void)
{
    pg = (size_t)sysconf(_SC_PAGESIZE);
    test_zero_length_installs();
    if (test_normal()) {
        test_faults();
        test_protected();
    }
    return check_finish();
}
