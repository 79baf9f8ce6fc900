/* test_abi.c - the promises that let the C ABI evolve: the header's
 * version macros against the library's, and bm_check_version. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
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

int main(void)
{
    test_version();
    return check_finish();
}
