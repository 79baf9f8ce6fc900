/*
 * compact_heap.h - the heap test_compact.c and test_compact_hostile.c
 * compact (C99, header only).
 *
 * 64-byte objects: object i holds its id i + 1, a counter and (if the
 * test asks) six check words word(i + 1, 2..7). The live objects are
 * every one of the first `dense` pages, then one in three. A compaction
 * slides the live objects down: to-space object k is from-space object
 * live[k], and the pages past the last live object are zero.
 */
#ifndef BULKMEM_TEST_COMPACT_HEAP_H
#define BULKMEM_TEST_COMPACT_HEAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bulkmem.h"

#define PAGE 4096
#define OBJ 64
#define PER_PAGE (PAGE / OBJ)
#define GOLDEN 0x9E3779B97F4A7C15ull

typedef struct {
    char *mem;      /* the heap: the to-space during a session */
    size_t pages;   /* its pages */
    size_t dense;   /* leading pages whose objects all live (BM_FILL_SAME) */
    uint32_t *live; /* from-space object index of each live object */
    size_t nlive;
    long spin_ns;   /* busy-wait per page built: a slow producer (the
                     * hostile tests' producer; 0: none) */
} heap_t;

static inline uint64_t word(size_t id, int w)
{
    return (uint64_t)id * GOLDEN + (uint64_t)w;
}

/* Writes the heap's objects at mem (the old layout), with the check words
 * if `words`, and lists the live. h->live is allocated unless h has one
 * (from an earlier call): h must be zeroed or laid out before. */
static inline void heap_fill(heap_t *h, char *mem, size_t pages, size_t dense, int words)
{
    h->mem = mem;
    h->pages = pages;
    h->dense = dense;
    if (!h->live)
        h->live = malloc(pages * PER_PAGE * sizeof(uint32_t));
    h->nlive = 0;
    for (size_t i = 0; i < pages * PER_PAGE; i++) {
        uint64_t *o = (uint64_t *)(mem + i * OBJ);
        o[0] = i + 1;
        o[1] = 0;
        if (words)
            for (int w = 2; w < 8; w++)
                o[w] = word(i + 1, w);
        if (i < dense * PER_PAGE || i % 3 == 0)
            h->live[h->nlive++] = (uint32_t)i;
    }
}

/* The producer (ctx: the heap_t): slides the live objects down.
 * Async-signal-safe: reads the from-space and h, writes out. */
static inline int heap_produce(void *ctx, size_t page, const void *from, void *out)
{
    const heap_t *h = ctx;
    if (page < h->dense)
        return BM_FILL_SAME;
    size_t first = page * PER_PAGE;
    if (first >= h->nlive)
        return BM_FILL_ZERO;
    size_t n = h->nlive - first < PER_PAGE ? h->nlive - first : PER_PAGE;
    for (size_t j = 0; j < n; j++)
        memcpy((char *)out + j * OBJ, (const char *)from + (size_t)h->live[first + j] * OBJ, OBJ);
    memset((char *)out + n * OBJ, 0, PAGE - n * OBJ);
    return BM_FILL_BUILT;
}

static inline size_t first_source(void *ctx, size_t page)
{
    const heap_t *h = ctx;
    size_t first = page * PER_PAGE;
    return first < h->nlive ? (size_t)h->live[first] * OBJ / PAGE : h->pages;
}

static inline uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A mutator's access to live object k at its new address: whether its id
 * reads right; with `write`, its counter incremented. */
static inline int heap_touch(const heap_t *h, size_t k, int write)
{
    _Atomic uint64_t *o = (_Atomic uint64_t *)(h->mem + k * OBJ);
    int ok = atomic_load_explicit(&o[0], memory_order_relaxed) == (uint64_t)h->live[k] + 1;
    if (write)
        atomic_fetch_add_explicit(&o[1], 1, memory_order_relaxed);
    return ok;
}

#endif /* BULKMEM_TEST_COMPACT_HEAP_H */
