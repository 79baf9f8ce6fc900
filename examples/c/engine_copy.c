/*
 * engine_copy.c - copy 1 GiB as 512 shuffled 2 MiB extents on bulkmem's
 * multi-threaded engine, three times, and print the bandwidth.
 *
 * Build and run:
 *   cc -O2 -std=c99 -Wall -Wextra $(pkg-config --cflags bulkmem) engine_copy.c \
 *      $(pkg-config --libs bulkmem) -Wl,-rpath,$(pkg-config --variable=libdir bulkmem) -o engine_copy
 *   ./engine_copy          # 1024 MiB
 *   ./engine_copy 64       # 64 MiB (a multiple of 2)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bulkmem.h>

#define EXTENT ((size_t)2 << 20)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    unsigned long mib = 1024;
    if (argc > 1) {
        char *end;
        mib = strtoul(argv[1], &end, 10);
        if (*end != '\0' || mib < 2 || mib % 2 != 0) {
            fprintf(stderr, "usage: %s [MiB, a multiple of 2; default 1024]\n", argv[0]);
            return 2;
        }
    }
    size_t total = (size_t)mib << 20, n = total / EXTENT;
    unsigned char *src = malloc(total), *dst = malloc(total);
    bm_extent *ext = malloc(n * sizeof *ext);
    size_t *perm = malloc(n * sizeof *perm);
    if (!src || !dst || !ext || !perm) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    /* Touch both buffers so page faults are not timed (non-zero: malloc +
     * memset(0) may become calloc, which touches nothing). */
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(dst, 0x5a, total);

    /* Extent i copies block perm[i]: the batch visits memory out of order. */
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        size_t j = x % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        ext[i].dst = dst + perm[i] * EXTENT;
        ext[i].src = src + perm[i] * EXTENT;
        ext[i].len = EXTENT;
    }

    bm_engine *e = bm_engine_new(NULL);
    if (!e) {
        perror("bm_engine_new");
        return 1;
    }
    const char *choice = bm_auto_choice(BM_OP_COPY, total, n, BM_HINT_AUTO);
    printf("bulkmem %s: %zu worker threads, auto picks %s for %zu x 2 MiB\n", bm_version(),
           bm_engine_threads(e), choice ? choice : "(none)", n);

    int status = 0;
    for (int run = 1; run <= 3; run++) {
        double t0 = now();
        int rc = bm_engine_copy_batch(e, ext, n);
        double dt = now() - t0;
        if (rc != 0) {
            fprintf(stderr, "bm_engine_copy_batch: %s (%s)\n", bm_strerror(rc), bm_last_error());
            status = 1;
            break;
        }
        printf("run %d: %zu MiB in %.3f ms: %.2f GB/s\n", run, total >> 20, dt * 1e3,
               (double)total / dt / 1e9);
    }
    if (status == 0 && memcmp(dst, src, total) != 0) {
        fprintf(stderr, "the destination differs from the source\n");
        status = 1;
    }

    bm_engine_free(e);
    free(perm);
    free(ext);
    free(dst);
    free(src);
    return status;
}
