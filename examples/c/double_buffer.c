/*
 * double_buffer.c - a double-buffered writer: while the program processes
 * block N (here: a checksum over it), bulkmem's engine copies block N+1 in
 * the background (bm_engine_submit_copy), and the program waits for that
 * copy only when it needs the block. This is how a snapshot writer, a
 * copying GC or a checkpointer overlaps its own work with a bulk copy.
 *
 * Build and run:
 *   cc -O2 -std=c99 -Wall -Wextra $(pkg-config --cflags bulkmem) double_buffer.c \
 *      $(pkg-config --libs bulkmem) -Wl,-rpath,$(pkg-config --variable=libdir bulkmem) -o double_buffer
 *   ./double_buffer        # 16 blocks of 16 MiB
 *   ./double_buffer 8 4    # 8 blocks of 4 MiB
 *
 * Prints the checksum of what was processed and of the source: they agree
 * only if every block arrived whole before it was processed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bulkmem.h>

/* The "processing": a position-dependent checksum of one block. */
static uint64_t checksum(const unsigned char *p, size_t len, uint64_t h)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * 0x100000001b3ull;
    }
    return h;
}

static int parse(const char *s, unsigned long *out)
{
    char *end;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && *out > 0;
}

int main(int argc, char **argv)
{
    unsigned long blocks = 16, mib = 16;
    if ((argc > 1 && !parse(argv[1], &blocks)) || (argc > 2 && !parse(argv[2], &mib)) ||
        argc > 3) {
        fprintf(stderr, "usage: %s [BLOCKS (default 16)] [MiB per block (default 16)]\n",
                argv[0]);
        return 2;
    }
    if (BM_CHECK_VERSION() != 0) {
        fprintf(stderr, "%s\n", bm_last_error());
        return 1;
    }
    size_t block = (size_t)mib << 20, total = blocks * block;
    unsigned char *src = malloc(total), *buf[2] = {malloc(block), malloc(block)};
    if (!src || !buf[0] || !buf[1]) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 11);
    uint64_t want = 0xcbf29ce484222325ull;
    for (unsigned long n = 0; n < blocks; n++)
        want = checksum(src + n * block, block, want);

    bm_engine *e = bm_engine_new(NULL);
    if (!e) {
        perror("bm_engine_new");
        return 1;
    }
    /* Block 0 is copied before the loop; inside it, block n+1 is in flight
     * while block n is processed. */
    bm_extent ext[2];
    bm_ticket *inflight = NULL;
    ext[0] = (bm_extent){.dst = buf[0], .src = src, .len = block};
    int rc = bm_engine_submit_copy(e, &ext[0], 1, 0, &inflight);
    uint64_t got = 0xcbf29ce484222325ull;
    for (unsigned long n = 0; rc == 0 && n < blocks; n++) {
        bm_report r;
        rc = bm_ticket_wait(inflight, -1, &r);
        bm_ticket_free(inflight);
        inflight = NULL;
        if (rc != 0)
            break;
        if (n + 1 < blocks) {
            bm_extent *x = &ext[(n + 1) % 2];
            *x = (bm_extent){.dst = buf[(n + 1) % 2], .src = src + (n + 1) * block, .len = block};
            rc = bm_engine_submit_copy(e, x, 1, 0, &inflight);
            if (rc != 0)
                break;
        }
        got = checksum(buf[n % 2], block, got);
    }
    bm_ticket_free(inflight);
    bm_engine_free(e);
    if (rc != 0) {
        fprintf(stderr, "double_buffer: %s (%d)\n", bm_last_error(), rc);
        return 1;
    }
    printf("processed %lu blocks of %lu MiB while the next one copied: checksum %016llx, source "
           "%016llx: %s\n",
           blocks, mib, (unsigned long long)got, (unsigned long long)want,
           got == want ? "match" : "MISMATCH");
    free(src);
    free(buf[0]);
    free(buf[1]);
    return got == want ? 0 : 1;
}
