/* Helpers shared by the preload's C tests, and whether the preload library
 * is loaded and active as the test expects:
 * present and active, or (BULKMEM_TEST_EXPECT_NO_PRELOAD set) absent.
 * Shared by the preload's C tests; needs check.h first. */
#ifndef PRELOAD_CHECK_H
#define PRELOAD_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A page-aligned buffer, or exit 2 (the tests cannot run without it). */
static unsigned char *alloc_buf(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0 || p == NULL) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(2);
    }
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check_preload_presence(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "bulkmem_preload_active");
    if (getenv("BULKMEM_TEST_EXPECT_NO_PRELOAD") != NULL) {
        CHECKF(sym == NULL, "BULKMEM_TEST_EXPECT_NO_PRELOAD is set, yet bulkmem_preload_active "
                            "is defined");
        check_note("note: BULKMEM_TEST_EXPECT_NO_PRELOAD set: testing plain libc (preload %s)",
                   sym == NULL ? "absent, as expected" : "PRESENT");
    } else {
        CHECKF(sym != NULL, "bulkmem_preload_active not found: is libbulkmem_preload.so in "
                            "LD_PRELOAD? (set BULKMEM_TEST_EXPECT_NO_PRELOAD to test plain libc)");
        if (sym != NULL) {
            int (*active)(void) = (int (*)(void))sym;
            CHECK_EQ_INT(active(), 1);
        }
        const char *mn = getenv("BULKMEM_PRELOAD_MIN"), *mt = getenv("BULKMEM_PRELOAD_MT_MIN");
        check_note("note: preload %s; BULKMEM_PRELOAD_MIN=%s BULKMEM_PRELOAD_MT_MIN=%s",
                   sym != NULL ? "active" : "MISSING", mn ? mn : "(unset)", mt ? mt : "(unset)");
    }
}

#endif
