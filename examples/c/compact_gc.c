/*
 * compact_gc.c - concurrent compaction from C: what a moving collector's
 * runtime does with bulkmem, in one file to copy from. A heap of 64-byte
 * objects is compacted by sliding the live ones down while two mutator
 * threads keep reading and writing objects at their new addresses; at the
 * end every byte of the heap is checked.
 *
 * Build and run:
 *   cc -O2 -std=c11 -Wall -Wextra -pthread $(pkg-config --cflags bulkmem) compact_gc.c \
 *      $(pkg-config --libs bulkmem) -Wl,-rpath,$(pkg-config --variable=libdir bulkmem) -o compact_gc
 *   ./compact_gc          # a 256 MiB heap
 *   ./compact_gc 16       # 16 MiB (a multiple of 2)
 *
 * The rules each step follows are the producer's contract in bulkmem.h
 * ("concurrent compaction"), the same words as docs/guide/moves.md.
 * Exits 0 when every object is where the compaction put it, with its
 * contents and every mutator write, and the free space is zero.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bulkmem.h>

#define PAGE 4096
#define OBJ 64
#define PER_PAGE (PAGE / OBJ)

/* An object: its id (its index in the heap before the compaction, plus
 * one), a counter the mutators increment, and six words derived from the
 * id that nothing writes. */
typedef struct {
    _Atomic uint64_t id;
    _Atomic uint64_t count;
    uint64_t words[6];
} object_t;

static uint64_t word(uint64_t id, int w)
{
    return id * 0x9E3779B97F4A7C15ull + (uint64_t)w;
}

/* What the collector decides in the pause and the producer reads: plain
 * tables, never changed while the heap is being compacted. */
typedef struct {
    char *heap;
    size_t pages;
    size_t dense;   /* leading pages whose objects all live: unchanged */
    uint32_t *live; /* old index of the k-th live object */
    size_t nlive;
} plan_t;

/* The producer: builds to-space page `page` (at heap + page * PAGE) from
 * the from-space, where the heap's pages are as they were in the pause.
 * It runs on the collector's threads and inside the SIGBUS handler of a
 * mutator that touched the page, so it only reads the plan and the
 * from-space and writes `out`: memcpy and memset, no malloc, locks or
 * stdio, and never the to-space (the heap's own addresses). */
static int produce(void *ctx, size_t page, const void *from_space, void *out)
{
    const plan_t *p = ctx;
    if (page < p->dense)
        return BM_FILL_SAME; /* unchanged and read by no other page: moved, not copied */
    size_t first = page * PER_PAGE;
    if (first >= p->nlive)
        return BM_FILL_ZERO; /* free space past the last live object */
    size_t n = p->nlive - first < PER_PAGE ? p->nlive - first : PER_PAGE;
    for (size_t j = 0; j < n; j++)
        memcpy((char *)out + j * OBJ, (const char *)from_space + (size_t)p->live[first + j] * OBJ, OBJ);
    memset((char *)out + n * OBJ, 0, PAGE - n * OBJ);
    return BM_FILL_BUILT;
}

/* The lowest from-space page that to-space pages `page`, page+1, ... read:
 * bulkmem frees the from-space below it as the compaction goes. The free
 * pages at the end read nothing: the heap's page count. */
static size_t first_source(void *ctx, size_t page)
{
    const plan_t *p = ctx;
    size_t first = page * PER_PAGE;
    return first < p->nlive ? (size_t)p->live[first] * OBJ / PAGE : p->pages;
}

/* A mutator: reads and writes random live objects at their new addresses
 * until told to stop, counting its writes per object. */
typedef struct {
    const plan_t *plan;
    uint64_t *tally; /* writes per live object, this thread's */
    uint64_t seed;
    size_t wrong;    /* reads that found another object */
    atomic_size_t ops;
} mutator_t;

static atomic_int stop_mutators;

static void *mutate(void *arg)
{
    mutator_t *m = arg;
    uint64_t x = m->seed;
    while (!atomic_load_explicit(&stop_mutators, memory_order_relaxed)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = x % m->plan->nlive;
        object_t *o = (object_t *)(m->plan->heap + k * OBJ);
        if (atomic_load_explicit(&o->id, memory_order_relaxed) != (uint64_t)m->plan->live[k] + 1)
            m->wrong++;
        atomic_fetch_add_explicit(&o->count, 1, memory_order_relaxed);
        m->tally[k]++;
        atomic_fetch_add_explicit(&m->ops, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Waits until every mutator has done `more` operations beyond `from`. */
static void let_mutators_run(mutator_t *m, int n, size_t more)
{
    for (int i = 0; i < n; i++) {
        size_t from = atomic_load(&m[i].ops);
        while (atomic_load(&m[i].ops) < from + more)
            sched_yield();
    }
}

/* The runtime's own fault handler, installed before bulkmem's: bulkmem
 * chains every SIGSEGV and SIGBUS that is not a compaction fault to it.
 * Here it serves a guard page (as a runtime's stack or null checks do) by
 * jumping back to the check that touched it. */
static char *guard;
static sigjmp_buf guard_jump;

static void runtime_fault(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    char *at = info->si_addr;
    if (at >= guard && at < guard + PAGE)
        siglongjmp(guard_jump, 1);
    signal(sig, SIG_DFL); /* not the runtime's either: the default kills */
}

static int guard_check(void)
{
    if (sigsetjmp(guard_jump, 1) != 0)
        return 1;
    (void)*(volatile char *)guard;
    return 0;
}

/* Every live object at its new address with its id, words and the sum of
 * the mutators' writes; every byte after the last one zero. */
static int check(const plan_t *p, mutator_t *m, int n)
{
    for (size_t k = 0; k < p->nlive; k++) {
        const object_t *o = (const object_t *)(p->heap + k * OBJ);
        uint64_t id = (uint64_t)p->live[k] + 1, writes = 0;
        for (int i = 0; i < n; i++)
            writes += m[i].tally[k];
        int ok = o->id == id && o->count == writes;
        for (int w = 0; w < 6; w++)
            ok = ok && o->words[w] == word(id, w);
        if (!ok) {
            printf("check: MISMATCH at live object %zu (id %llu, expected %llu)\n", k,
                   (unsigned long long)o->id, (unsigned long long)id);
            return 0;
        }
    }
    for (size_t b = p->nlive * OBJ; b < p->pages * PAGE; b++) {
        if (p->heap[b] != 0) {
            printf("check: MISMATCH: free byte %zu is not zero\n", b);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    if (mib < 2 || mib % 2 != 0) {
        fprintf(stderr, "usage: %s [heap MiB, a multiple of 2; default 256]\n", argv[0]);
        return 2;
    }
    plan_t p = {0};
    p.pages = mib << 20 >> 12;
    p.heap = mmap(NULL, p.pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    guard = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p.live = malloc(p.pages * PER_PAGE * sizeof *p.live);
    if (p.heap == MAP_FAILED || guard == MAP_FAILED || !p.live) {
        perror("compact_gc: memory");
        return 1;
    }
    struct sigaction sa = {0};
    sa.sa_sigaction = runtime_fault;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);

    /* The heap before: every object of the first eighth of the pages
     * lives, then one in three. */
    p.dense = p.pages / 8;
    for (size_t i = 0; i < p.pages * PER_PAGE; i++) {
        object_t *o = (object_t *)(p.heap + i * OBJ);
        o->id = i + 1;
        o->count = 0;
        for (int w = 0; w < 6; w++)
            o->words[w] = word(i + 1, w);
        if (i < p.dense * PER_PAGE || i % 3 == 0)
            p.live[p.nlive++] = (uint32_t)i;
    }

    /* The pause: the plan is made (above) and the mutators' references
     * would be pointed at the new addresses; then the heap's pages become
     * the from-space and its addresses an empty to-space. */
    int supported = bm_compact_supported();
    bm_compact_options opts = {BM_COMPACT_AUTO, 1, 0, BM_COMPACT_HUGE_OFF};
    bm_compact_stats st;
    enum { MUTATORS = 2 };
    mutator_t m[MUTATORS];
    for (int i = 0; i < MUTATORS; i++) {
        m[i] = (mutator_t){.plan = &p, .seed = 88172645463325252ull + (uint64_t)i * 7919};
        m[i].tally = calloc(p.nlive, sizeof *m[i].tally);
        atomic_init(&m[i].ops, 0);
    }
    if (supported < 0) {
        /* No userfaultfd here (or not allowed): the same producer, all of
         * it inside the pause. */
        printf("concurrent compaction unavailable (%s): compacting in the pause\n", bm_last_error());
        if (bm_compact_stop_the_world(p.heap, p.pages * PAGE, produce, first_source, &p, &opts, &st) != 0) {
            fprintf(stderr, "bm_compact_stop_the_world: %s\n", bm_last_error());
            return 1;
        }
        int ok = check(&p, m, MUTATORS);
        printf("check: %s\n", ok ? "ok" : "FAILED");
        return ok ? 0 : 1;
    }
    bm_compaction *c = bm_compact_prepare(p.heap, p.pages * PAGE, produce, first_source, &p, &opts);
    if (!c) {
        fprintf(stderr, "bm_compact_prepare: %s\n", bm_last_error());
        return 1;
    }

    /* The pause ends: mutators run from here on, across bm_compact_finish
     * and after it. A page they touch before anyone built it takes a
     * SIGBUS that bulkmem serves with `produce`. */
    pthread_t th[MUTATORS];
    for (int i = 0; i < MUTATORS; i++)
        pthread_create(&th[i], NULL, mutate, &m[i]);
    if (bm_compact_start(c) != 0) { /* the collector thread builds the rest */
        fprintf(stderr, "bm_compact_start: %s\n", bm_last_error());
        return 1;
    }
    let_mutators_run(m, MUTATORS, 10000);

    /* A system call does not fault pages in (it fails with EFAULT): the
     * runtime ensures the range first. Here: the last live object, written
     * to a pipe and read back. */
    int fds[2];
    object_t last;
    object_t *at = (object_t *)(p.heap + (p.nlive - 1) * OBJ);
    if (pipe(fds) != 0 || bm_compact_ensure(c, at, OBJ) != 0 || write(fds[1], at, OBJ) != OBJ ||
        read(fds[0], &last, OBJ) != OBJ || last.id != (uint64_t)p.live[p.nlive - 1] + 1) {
        fprintf(stderr, "a system call on the heap: %s\n", bm_last_error());
        return 1;
    }
    int guarded = guard_check(); /* the runtime's handler still gets its faults */

    if (bm_compact_finish(c, &st) != 0) { /* every page built; mutators still running */
        fprintf(stderr, "bm_compact_finish: %s\n", bm_last_error());
        return 1;
    }
    let_mutators_run(m, MUTATORS, 10000);
    atomic_store(&stop_mutators, 1);
    size_t ops = 0, wrong = 0;
    for (int i = 0; i < MUTATORS; i++) {
        pthread_join(th[i], NULL);
        ops += atomic_load(&m[i].ops);
        wrong += m[i].wrong;
    }

    printf("compacted a %zu MiB heap (%zu pages, %zu live objects) under %d mutators (%zu reads and writes)\n",
           mib, p.pages, p.nlive, MUTATORS, ops);
    printf("pause %.0f us; pages built by the collector %zu, in mutator faults %zu; stall p50 %.1f us, p99 %.1f us\n",
           st.pause_us, st.by_collector, st.by_mutators, st.stall_p50_us, st.stall_p99_us);
    printf("BM_FILL_SAME pages %zu: moved %zu, copied instead %zu; pages copied %zu, zero %zu (UFFDIO_MOVE %s)\n",
           p.dense, st.moved, st.move_fallbacks, st.copied, st.zeroed, supported == 1 ? "yes" : "no");
    printf("the runtime's own SIGSEGV handler ran: %s\n", guarded ? "yes" : "NO");
    int ok = check(&p, m, MUTATORS) && wrong == 0 && guarded;
    printf("check: %s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
