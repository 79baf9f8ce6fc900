/* Boehm GC under the preload: a program that allocates lists of small
 * objects and large buffers it fills and copies (the preload's large
 * calls), then prints how many collections ran and the heap they left.
 * The collector decides when to collect from what it allocated and what
 * it scans as roots, so both must come out as without the preload.
 * argv[1]: "full" (stop-the-world marking) or "incremental" (the
 * collector's write barrier: protected pages and their faults). */
#include <gc.h>
#include <stdio.h>
#include <string.h>

struct node {
    struct node *next;
    char *payload;
};

int main(int argc, char **argv)
{
    GC_INIT();
    if (argc > 1 && strcmp(argv[1], "incremental") == 0)
        GC_enable_incremental();
    struct node *keep = NULL;
    size_t big = 4u << 20, sum = 0;
    for (int round = 0; round < 200; round++) {
        /* Small objects: a list, most of it dropped at once. */
        struct node *list = NULL;
        for (int i = 0; i < 2000; i++) {
            struct node *n = GC_MALLOC(sizeof *n);
            n->next = list;
            n->payload = GC_MALLOC_ATOMIC(48);
            memset(n->payload, i, 48);
            list = n;
        }
        /* Large buffers, filled and copied (each call >= 1 MiB). */
        char *a = GC_MALLOC_ATOMIC(big), *b = GC_MALLOC_ATOMIC(big);
        memset(a, round, big);
        memcpy(b, a, big);
        memmove(b + 1, b, big - 1);
        sum += (unsigned char)b[big / 2];
        /* A pointer-holding large object, copied: the collector scans
         * it, so its pointers must survive the copy intact. */
        struct node **ptrs = GC_MALLOC(big), **copy = GC_MALLOC(big);
        for (size_t i = 0; i < big / sizeof *ptrs; i++)
            ptrs[i] = list;
        memcpy(copy, ptrs, big);
        if (round % 10 == 0) {
            list->next = keep;
            keep = list;
        }
        if (copy[big / sizeof *copy - 1] != list) {
            printf("OUTCOME pointer lost in round %d\n", round);
            return 1;
        }
    }
    GC_gcollect();
    size_t kept = 0;
    for (struct node *n = keep; n; n = n->next)
        kept++;
    printf("OUTCOME kept %zu sum %zu\n", kept, sum);
    printf("GC collections %lu heap %lu MiB\n", (unsigned long)GC_get_gc_no(),
           (unsigned long)(GC_get_heap_size() >> 20));
    return 0;
}
