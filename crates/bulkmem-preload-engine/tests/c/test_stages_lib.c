/* A library whose constructor makes the process's first large copy, so
 * that the preload opens its engine from inside the dynamic loader's
 * dlopen of this library (tests/c/test_stages.c "ctor"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int stages_lib_copied;

__attribute__((constructor)) static void copy_at_load(void)
{
    volatile size_t n = 4 << 20;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b)
        return;
    for (size_t i = 0; i < n; i++)
        a[i] = (char)(i * 13 + 5);
    memcpy(b, a, n);
    stages_lib_copied = memcmp(a, b, n) == 0 ? 1 : -1;
    free(a);
    free(b);
}
