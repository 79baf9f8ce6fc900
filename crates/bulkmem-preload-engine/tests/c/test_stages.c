/* Which of the preload's two stages a process has mapped: the loader
 * (libbulkmem_preload.so) opens its engine at the first call that needs
 * it (tests/preload_suite.rs). "large": a 4 MiB memcpy, checked; "ctor
 * LIB": dlopen LIB, whose constructor makes the first large copy. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strstr(line, name))
            found = 1;
    fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    printf("engine-at-start %d\n", mapped("libbulkmem_preload_engine.so"));
    if (argc > 1 && strcmp(argv[1], "large") == 0) {
        volatile size_t n = 4 << 20;
        char *a = malloc(n), *b = malloc(n);
        if (!a || !b)
            return 2;
        for (size_t i = 0; i < n; i++)
            a[i] = (char)(i * 7 + 1);
        memcpy(b, a, n);
        if (memcmp(a, b, n) != 0) {
            puts("WRONG");
            return 1;
        }
        printf("engine-after-large %d\n", mapped("libbulkmem_preload_engine.so"));
        free(a);
        free(b);
    }
    if (argc > 2 && strcmp(argv[1], "ctor") == 0) {
        void *h = dlopen(argv[2], RTLD_NOW);
        int *copied = h ? dlsym(h, "stages_lib_copied") : NULL;
        if (!copied) {
            printf("dlopen: %s\n", dlerror());
            return 1;
        }
        printf("copied-in-constructor %d\n", *copied);
        printf("engine-after-large %d\n", mapped("libbulkmem_preload_engine.so"));
    }
    return 0;
}
