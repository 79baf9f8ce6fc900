/* test_compact.c - concurrent compaction from C: a heap of 64-byte objects
 * (an id and a counter each, one in three live) compacted by sliding while
 * a mutator thread increments counters of live objects at their new
 * addresses; every counter must be exact afterwards. Also: a system call
 * on an unbuilt page (EFAULT until bm_compact_ensure), the stop-the-world
 * path, and refused arguments. Runs in a process of its own (the suite
 * runs each C test as one), since sessions take SIGBUS. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"
#include "compact_heap.h"

#define PAGES 2048

/* The heap of PAGES pages, no dense prefix, no check words; NULL if it
 * cannot be mapped. */
static char *new_heap(heap_t *h)
{
    char *m = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    memset(h, 0, sizeof *h);
    heap_fill(h, m, PAGES, 0, 0);
    return m;
}

typedef struct {
    heap_t *h;
    uint64_t *tally;
    size_t ops;
    int wrong;
} mutator_t;

static void *mutate(void *arg)
{
    mutator_t *m = arg;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < m->ops; i++) {
        size_t k = xorshift(&x) % m->h->nlive;
        if (!heap_touch(m->h, k, 1))
            m->wrong++;
        m->tally[k]++;
    }
    return NULL;
}

static int verify(const char *heap, const heap_t *h, const uint64_t *tally)
{
    for (size_t k = 0; k < h->nlive; k++) {
        const uint64_t *o = (const uint64_t *)(heap + k * OBJ);
        if (o[0] != (uint64_t)h->live[k] + 1 || o[1] != (tally ? tally[k] : 0))
            return 0;
    }
    return 1;
}

static void concurrent(unsigned mode)
{
    heap_t h;
    char *heap = new_heap(&h);
    CHECK(heap != NULL);
    bm_compact_options o = {mode, 1, 32, 0};
    bm_compaction *c = bm_compact_prepare(heap, PAGES * PAGE, heap_produce, first_source, &h, &o);
    CHECKF(c != NULL, "mode %u: %s", mode, bm_last_error());
    if (!c)
        return;
    mutator_t m = {&h, calloc(h.nlive, sizeof(uint64_t)), 20000, 0};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, mutate, &m), 0);
    CHECK_EQ_INT(bm_compact_start(c), 0);
    bm_compact_stats st;
    CHECK_EQ_INT(bm_compact_finish(c, &st), 0);
    pthread_join(th, NULL);
    CHECK_EQ_INT(m.wrong, 0);
    CHECKF(verify(heap, &h, m.tally), "mode %u: counters", mode);
    CHECK_EQ_SIZE(st.by_collector + st.by_mutators, (size_t)PAGES);
    CHECK_EQ_SIZE(st.pages, (size_t)PAGES);
    CHECK_EQ_SIZE(st.failed, (size_t)0);
    CHECK(st.pause_us > 0);
    free(m.tally);
    free(h.live);
    munmap(heap, PAGES * PAGE);
}

static void system_calls_need_ensure(void)
{
    heap_t h;
    char *heap = new_heap(&h);
    bm_compaction *c = bm_compact_prepare(heap, PAGES * PAGE, heap_produce, NULL, &h, NULL);
    CHECKF(c != NULL, "%s", bm_last_error());
    if (!c)
        return;
    int fds[2];
    char buf[OBJ];
    memset(buf, 7, sizeof buf);
    CHECK_EQ_INT(pipe(fds), 0);
    CHECK_EQ_INT((int)write(fds[1], buf, OBJ), OBJ);
    char *page = heap + 5 * PAGE;
    CHECK_EQ_INT((int)read(fds[0], page, OBJ), -1);
    CHECK_EQ_INT(errno, EFAULT);
    CHECK_EQ_INT(bm_compact_ensure(c, page, OBJ), 0);
    CHECK_EQ_INT((int)read(fds[0], page, OBJ), OBJ);
    CHECK_EQ_INT(bm_compact_ensure(c, heap + PAGES * PAGE, 1), -EINVAL);
    /* The sized statistics: a size below the first version is refused
     * with the session left running; a larger one gets its tail zeroed. */
    bm_compact_stats_v2 small = BM_COMPACT_STATS_V2_INIT;
    small.size = BM_COMPACT_STATS_V2_SIZE_VER0 - 8;
    CHECK_EQ_INT(bm_compact_finish_v2(c, &small), -EINVAL);
    CHECK(strstr(bm_last_error(), "bm_compact_stats_v2.size") != NULL);
    CHECK_EQ_SIZE(sizeof(bm_compact_stats_v2), (size_t)BM_COMPACT_STATS_V2_SIZE_VER0);
    unsigned char buf2[sizeof(bm_compact_stats_v2) + 16];
    memset(buf2, 0xff, sizeof buf2);
    size_t size = sizeof buf2;
    memcpy(buf2, &size, sizeof size);
    CHECK_EQ_INT(bm_compact_finish_v2(c, (bm_compact_stats_v2 *)(void *)buf2), 0);
    bm_compact_stats_v2 st;
    memcpy(&st, buf2, sizeof st);
    CHECK_EQ_SIZE(st.size, sizeof buf2);
    CHECK_EQ_SIZE(st.stats.pages, (size_t)PAGES);
    CHECK_EQ_SIZE(st.stats.by_collector + st.stats.by_mutators, (size_t)PAGES);
    CHECK(st.stats.by_mutators >= 1); /* the page ensure built */
    CHECK_EQ_SIZE(st.memory_waits, (size_t)0);
    for (size_t i = sizeof st; i < sizeof buf2; i++)
        CHECK(buf2[i] == 0);
    CHECK(page[0] == 7);
    close(fds[0]);
    close(fds[1]);
    free(h.live);
    munmap(heap, PAGES * PAGE);
}

static void stop_the_world_and_bad_arguments(void)
{
    heap_t h;
    char *heap = new_heap(&h);
    bm_compact_stats st;
    CHECK_EQ_INT(bm_compact_stop_the_world(heap, PAGES * PAGE, heap_produce, first_source, &h, NULL, &st), 0);
    CHECK(verify(heap, &h, NULL));
    CHECK_EQ_SIZE(st.by_collector, (size_t)PAGES);

    bm_compact_options bad = {7, 0, 0, 0};
    errno = 0;
    CHECK(bm_compact_prepare(heap, PAGES * PAGE, heap_produce, NULL, &h, &bad) == NULL);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK(strstr(bm_last_error(), "mode 7") != NULL);
    errno = 0;
    CHECK(bm_compact_prepare(heap, PAGES * PAGE, NULL, NULL, &h, NULL) == NULL);
    CHECK_EQ_INT(errno, EINVAL);
    errno = 0;
    CHECK(bm_compact_prepare(heap + 1, PAGE, heap_produce, NULL, &h, NULL) == NULL);
    CHECK_EQ_INT(errno, EINVAL);
    CHECK(strstr(bm_last_error(), "page-aligned") != NULL);
    CHECK_EQ_INT(bm_compact_start(NULL), -EINVAL);
    CHECK_EQ_INT(bm_compact_finish(NULL, NULL), -EINVAL);
    /* The heap was left alone by the refused calls. */
    CHECK(verify(heap, &h, NULL));
    free(h.live);
    munmap(heap, PAGES * PAGE);
}

int main(void)
{
    int s = bm_compact_supported();
    if (s < 0) {
        check_note("concurrent compaction skipped: %s", bm_last_error());
        stop_the_world_and_bad_arguments();
        return check_finish();
    }
    concurrent(BM_COMPACT_COPY);
    concurrent(BM_COMPACT_AUTO);
    if (s == 1)
        concurrent(BM_COMPACT_MOVE);
    system_calls_need_ensure();
    stop_the_world_and_bad_arguments();
    return check_finish();
}
