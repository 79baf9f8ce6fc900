#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bulkmem.h>

int main(void)
{
    size_t len = (size_t)64 << 20;
    char *src = malloc(len), *dst = malloc(len);
    if (!src || !dst)
        return 1;
    memset(src, 1, len);
    int rc = bm_copy(dst, src, len); /* 0, or a negative errno */
    if (rc != 0) {
        fprintf(stderr, "bm_copy: %s: %s\n", bm_strerror(rc), bm_last_error());
        return 1;
    }
    int same = memcmp(dst, src, len) == 0;
    printf("copied 64 MiB with bulkmem %s: %s\n", bm_version(), same ? "match" : "MISMATCH");
    free(src);
    free(dst);
    return same ? 0 : 1;
}
