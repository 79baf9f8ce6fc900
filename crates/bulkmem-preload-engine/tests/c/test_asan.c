/* test_asan.c - built with -fsanitize=address: a 4 MiB memcpy (or with
 * the argument "small", a 100-byte one, which the preload would do
 * itself) that overflows its heap destination by 16 bytes must be
 * reported by ASan's interceptor, with and without libbulkmem_preload.so
 * (run with ASAN_OPTIONS=verify_asan_link_order=0, so that the preload
 * may come before the ASan runtime). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile p_memcpy)(void *, const void *, size_t) = memcpy;

int main(int argc, char **argv)
{
    size_t n = argc > 1 && !strcmp(argv[1], "small") ? 100 : (size_t)4 << 20;
    unsigned char *src = malloc(n + 16), *dst = malloc(n);
    memset(src, 1, n + 16);
    p_memcpy(dst, src, n + 16);
    printf("OUTCOME the overflowing copy was not reported\n");
    free(src);
    free(dst);
    return 0;
}
