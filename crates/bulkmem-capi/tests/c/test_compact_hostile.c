/* test_compact_hostile.c - hostile programs against concurrent compaction,
 * as an outside reviewer of a garbage-collector runtime would write them:
 * the heap of test_compact.c (64-byte objects holding an id, a counter and
 * six check words; one in three live, after a prefix of wholly live pages
 * the producer hands back as BM_FILL_SAME) compacted by sliding while
 * mutators run, under everything a real runtime does to a process:
 * mlockall, signal handlers that read the heap, asynchronous cancellation,
 * siglongjmp out of a time-out handler, heaps with holes, protections,
 * several mappings, shared and hugetlb memory, mlock, mprotect during a
 * session, overlapping sessions (and a live session's from-space),
 * seccomp, RLIMIT_AS, more faulting threads than staging buffers, every
 * thread on one page, several spaces in one pause, allocation during a
 * session. In the signal cases a page served on the mutator's thread asks
 * a signaller thread for the signal and waits for it to be pending, so
 * signals arrive while pages are being served, not just near them.
 *
 * Each case runs in a forked child (a session takes SIGBUS, and a broken
 * case may kill its process or hang); the parent waits with a 60 s
 * watchdog and records a case as passed only if its child exited 0. The
 * children report their own failures on stderr. The contract tested is
 * bulkmem.h's "concurrent compaction (userfaultfd SIGBUS mode)". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"
#include "compact_heap.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define SLOW_NS 30000L /* a slow producer: 30 us per page */
#define WATCHDOG_S 60
#define START_AFTER 200 /* mutator ops before the collector starts */
#define LABEL 96        /* a session's label, "<what> <MODE>" */

/* ---- the heap: compact_heap.h's, with the check words ----------------- */

/* Busy-waits ns nanoseconds (clock_gettime is async-signal-safe). */
static void spin_for(long ns)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

/* Cases 2 and 4: a page served on a signalled mutator thread kicks the
 * signaller thread (sem_post), then waits up to 500 us for the signal to
 * be pending here (sigpending): it arrives while the page is served, and
 * is delivered when bulkmem's handler returns. */
static __thread int t_signalled;
static sem_t g_kick;
static int g_kick_sig;
static _Atomic unsigned long g_kicks, g_arrived_in_serve;

static long elapsed_ns(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1000000000L + (b.tv_nsec - a->tv_nsec);
}

static void kick_and_wait_for_signal(void)
{
    struct timespec a;
    sigset_t p;
    sem_post(&g_kick);
    atomic_fetch_add(&g_kicks, 1);
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        sigpending(&p);
        if (sigismember(&p, g_kick_sig)) {
            atomic_fetch_add(&g_arrived_in_serve, 1);
            return;
        }
    } while (elapsed_ns(&a) < 500000L);
}

/* compact_heap.h's producer (it slides the live objects down), slowed by
 * h->spin_ns. Async-signal-safe: reads the from-space and h, writes out
 * (and for cases 2 and 4 posts a semaphore and asks sigpending). */
static int produce(void *ctx, size_t page, const void *from, void *out)
{
    const heap_t *h = ctx;
    if (t_signalled)
        kick_and_wait_for_signal();
    if (h->spin_ns > 0)
        spin_for(h->spin_ns);
    return heap_produce(ctx, page, from, out);
}

static size_t last_source(void *ctx, size_t page)
{
    const heap_t *h = ctx;
    size_t end = (page + 1) * PER_PAGE; /* one past the page's last object */
    if (end > h->nlive)
        end = h->nlive;
    return (size_t)h->live[end - 1] * OBJ / PAGE + 1;
}

/* A heap laid out at mem (the old layout), which the caller mapped and
 * heap_free unmaps. */
static void heap_at(heap_t *h, char *mem, size_t pages, size_t dense)
{
    memset(h, 0, sizeof *h);
    heap_fill(h, mem, pages, dense, 1);
}

/* The heap laid out again where it is, as before any compaction. */
static void heap_reset(heap_t *h)
{
    heap_fill(h, h->mem, h->pages, h->dense, 1);
}

static int heap_new(heap_t *h, size_t pages, size_t dense)
{
    memset(h, 0, sizeof *h);
    char *m = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    heap_at(h, m, pages, dense);
    return 1;
}

static void heap_free(heap_t *h)
{
    if (h->mem)
        munmap(h->mem, h->pages * PAGE);
    free(h->live);
    memset(h, 0, sizeof *h);
}

static size_t live_pages(const heap_t *h)
{
    return (h->nlive + PER_PAGE - 1) / PER_PAGE;
}

/* The compacted heap: live object k at mem + k * OBJ with its id, check
 * words and (if `counters`) counts[k] increments (0 with counts NULL);
 * zeros from the last live object up to byte zero_end. Returns the
 * number of wrong objects or words (the first few printed). */
static size_t verify_heap(const heap_t *h, const uint32_t *counts, int counters, size_t zero_end)
{
    size_t bad = 0;
    for (size_t k = 0; k < h->nlive; k++) {
        const uint64_t *o = (const uint64_t *)(h->mem + k * OBJ);
        uint64_t id = (uint64_t)h->live[k] + 1, want = counts ? counts[k] : 0;
        int ok = o[0] == id && (!counters || o[1] == want);
        for (int w = 2; w < 8; w++)
            ok = ok && o[w] == word(id, w);
        if (!ok && bad++ < 3)
            fprintf(stderr, "    object %zu (page %zu): id %llu counter %llu, want id %llu counter %llu\n",
                    k, k * OBJ / PAGE, (unsigned long long)o[0], (unsigned long long)o[1],
                    (unsigned long long)id, (unsigned long long)want);
    }
    for (size_t b = h->nlive * OBJ; b < zero_end; b += 8) {
        uint64_t v = *(const uint64_t *)(h->mem + b);
        if (v != 0 && bad++ < 3)
            fprintf(stderr, "    free space at byte %zu (page %zu) holds %#llx\n", b, b / PAGE,
                    (unsigned long long)v);
    }
    return bad;
}

/* The heap as it was before any compaction, every object at its old
 * address, skipping pages [skip_from, skip_to). */
static size_t verify_original(const heap_t *h, size_t skip_from, size_t skip_to)
{
    size_t bad = 0;
    for (size_t i = 0; i < h->pages * PER_PAGE; i++) {
        size_t p = i / PER_PAGE;
        if (p >= skip_from && p < skip_to)
            continue;
        const uint64_t *o = (const uint64_t *)(h->mem + i * OBJ);
        int ok = o[0] == i + 1 && o[1] == 0;
        for (int w = 2; w < 8; w++)
            ok = ok && o[w] == word(i + 1, w);
        if (!ok && bad++ < 3)
            fprintf(stderr, "    old object %zu (page %zu): id %llu, want %zu\n", i, p,
                    (unsigned long long)o[0], i + 1);
    }
    return bad;
}

/* ---- process state ---------------------------------------------------- */

/* The file at path, cap - 1 bytes at most, into buf (NUL-terminated);
 * returns the bytes read, 0 if it cannot be read. */
static size_t read_text(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r;
        while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
            n += (size_t)r;
        close(fd);
    }
    buf[n] = 0;
    return n;
}

/* The lines of /proc/self/maps overlapping [a, a + len) into out (cap
 * bytes); returns the number of all lines (every mapping). */
static size_t maps_of(const void *a, size_t len, char *out, size_t cap)
{
    static char buf[1 << 20];
    size_t lines = 0, used = 0;
    read_text("/proc/self/maps", buf, sizeof buf);
    out[0] = 0;
    uintptr_t lo = (uintptr_t)a, hi = lo + len;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) + 1 : strlen(line);
        char *dash;
        uintptr_t s = (uintptr_t)strtoull(line, &dash, 16);
        uintptr_t e = (uintptr_t)strtoull(dash + 1, NULL, 16);
        lines++;
        if (s < hi && lo < e && used + ll < cap) {
            memcpy(out + used, line, ll);
            used += ll;
            out[used] = 0;
        }
        line += ll;
    }
    return lines;
}

/* The one readable and writable mapping of exactly len bytes other than
 * `not` (a session's from-space); NULL if none or several. */
static char *mapping_of_size(size_t len, const void *not)
{
    static char buf[1 << 20];
    read_text("/proc/self/maps", buf, sizeof buf);
    char *found = NULL;
    int count = 0;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        char *dash, *end;
        uintptr_t s = (uintptr_t)strtoull(line, &dash, 16);
        uintptr_t e = (uintptr_t)strtoull(dash + 1, &end, 16);
        if (e - s == len && (char *)s != (const char *)not && end[1] == 'r' && end[2] == 'w') {
            found = (char *)s;
            count++;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    return count == 1 ? found : NULL;
}

/* Whether the range is wholly unmapped (mincore says ENOMEM). */
static int unmapped(const void *a, size_t len)
{
    unsigned char vec[64];
    for (size_t off = 0; off < len; off += PAGE)
        if (mincore((char *)a + off, PAGE, vec) == 0 || errno != ENOMEM)
            return 0;
    return 1;
}

static long vm_size_kb(void)
{
    char buf[8192];
    if (!read_text("/proc/self/status", buf, sizeof buf))
        return -1;
    char *p = strstr(buf, "VmSize:");
    return p ? strtol(p + 7, NULL, 10) : -1;
}

/* ---- cases: the child's side ------------------------------------------ */

static int g_support;             /* bm_compact_supported(), asked in a child */
static char g_support_why[512];   /* bm_last_error() then */
static int g_case_skipped;

static CHECK_PRINTF_(1, 2) void skip_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  skipped: ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    g_case_skipped = 1;
}

static int need_sessions(void)
{
    if (g_support >= 0)
        return 1;
    skip_case("concurrent compaction is not supported here: %s", g_support_why);
    return 0;
}

static const char *mode_name(unsigned m)
{
    return m == BM_COMPACT_COPY ? "COPY" : m == BM_COMPACT_MOVE ? "MOVE" : "AUTO";
}

static const unsigned all_modes[] = {BM_COMPACT_COPY, BM_COMPACT_AUTO, BM_COMPACT_MOVE};

/* Whether mode m can run here (MOVE needs moves); notes it if not. */
static int mode_ok(unsigned m)
{
    if (m == BM_COMPACT_MOVE && g_support != 1) {
        check_note("  MOVE skipped: no UFFDIO_MOVE here");
        return 0;
    }
    return 1;
}

/* The cases that run once per mode: advances *i to the first of
 * modes[*i..n) that can run here (mode_ok notes the others); 0 when none
 * is left. */
static int next_mode(const unsigned *modes, size_t n, size_t *i)
{
    for (; *i < n; ++*i)
        if (mode_ok(modes[*i]))
            return 1;
    return 0;
}

static void note_stats(const char *label, const bm_compact_stats *st)
{
    check_note("  %s: pages %zu faults %zu waits %zu by_mutators %zu moved %zu copied %zu "
               "zeroed %zu move_fallbacks %zu eexist %zu failed %zu released %zu stall_max %.0f us",
               label, st->pages, st->faults, st->waits, st->by_mutators, st->moved, st->copied,
               st->zeroed, st->move_fallbacks, st->eexist, st->failed, st->released,
               st->stall_max_us);
}

/* The checks every session's stats must pass. */
static void check_stats(const char *label, const bm_compact_stats *st, size_t pages)
{
    CHECKF(st->failed == 0, "%s: %zu pages failed", label, st->failed);
    CHECKF(st->eexist == 0, "%s: %zu pages populated behind the session's back", label, st->eexist);
    CHECKF(st->pages == pages, "%s: stats say %zu pages, the heap has %zu", label, st->pages, pages);
    CHECKF(st->by_collector + st->by_mutators == pages, "%s: %zu + %zu pages built of %zu", label,
           st->by_collector, st->by_mutators, pages);
}

/* A mutator: random live objects at their new addresses, reading the id
 * and (write) incrementing the counter; at least `ops` of them, and on
 * until *runs reaches min_runs if runs is set. */
typedef struct {
    heap_t *h;
    uint64_t seed;
    size_t ops;
    int write;
    int unblock;                 /* a signal this thread unblocks (0: none) */
    _Atomic unsigned long *runs; /* go on until *runs >= min_runs */
    unsigned long min_runs;
    uint32_t *tally;             /* increments per live object */
    size_t notify_at;            /* posts *notify after this many ops */
    sem_t *notify;
    int signalled;               /* its served pages kick the signaller */
    size_t wrong;                /* ids that read wrong */
    _Atomic size_t done;         /* ops done */
    _Atomic int finished;
} mut_t;

static void *mutate(void *arg)
{
    mut_t *m = arg;
    if (m->unblock) {
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, m->unblock);
        pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    }
    t_signalled = m->signalled;
    uint64_t x = m->seed | 1;
    for (size_t i = 0;; i++) {
        if (i >= m->ops) {
            if (!m->runs || atomic_load(m->runs) >= m->min_runs)
                break;
            if (m->signalled && (i & 1023) == 0)
                sem_post(&g_kick); /* every page built: ask for signals directly */
        }
        size_t k = xorshift(&x) % m->h->nlive;
        if (!heap_touch(m->h, k, m->write))
            m->wrong++;
        if (m->write)
            m->tally[k]++;
        atomic_store_explicit(&m->done, i + 1, memory_order_release);
        if (m->notify && i + 1 == m->notify_at)
            sem_post(m->notify);
    }
    t_signalled = 0;
    atomic_store(&m->finished, 1);
    if (m->signalled)
        sem_post(&g_kick); /* the signaller sees finished */
    return NULL;
}

static void mut_init(mut_t *m, heap_t *h, uint64_t seed, size_t ops, int write)
{
    memset(m, 0, sizeof *m);
    m->h = h;
    m->seed = seed;
    m->ops = ops;
    m->write = write;
    m->tally = calloc(h->nlive, sizeof(uint32_t));
}

static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0 && errno == EINTR)
        ;
}

/* m posts *sem after START_AFTER ops: the caller starts the collector
 * then, so that the mutator has faulted alone first. */
static void notify_early(mut_t *m, sem_t *sem)
{
    sem_init(sem, 0, 0);
    m->notify = sem;
    m->notify_at = START_AFTER;
}

/* A writing mutator of 20000 ops on h, started (thread *t); it posts
 * *early after START_AFTER ops. */
static void start_mutator(mut_t *m, pthread_t *t, sem_t *early, heap_t *h, uint64_t seed)
{
    mut_init(m, h, seed, 20000, 1);
    notify_early(m, early);
    CHECK_EQ_INT(pthread_create(t, NULL, mutate, m), 0);
}

/* A compaction of h with `nmut` mutators (created after prepare), the
 * collector started, finish while they run. `after_prepare` runs in the
 * pause. Checks the heap and the stats; the stats into *out if out (zero
 * if prepare refused). */
typedef struct {
    unsigned mode;
    int nmut;
    size_t ops;
    int write;
    void (*after_prepare)(heap_t *h);
} sess_t;

static int compact_with_mutators(heap_t *h, const char *label, const sess_t *s, bm_compact_stats *out)
{
    bm_compact_options o = {s->mode, 1, 32, 0};
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    if (out)
        *out = st;
    errno = 0;
    bm_compaction *c = bm_compact_prepare(h->mem, h->pages * PAGE, produce, first_source, h, &o);
    if (!CHECKF(c != NULL, "%s: prepare: errno %d: %s", label, errno, bm_last_error()))
        return 0;
    if (s->after_prepare)
        s->after_prepare(h);
    mut_t m[8];
    pthread_t th[8];
    sem_t started;
    sem_init(&started, 0, 0);
    int n = s->nmut > 8 ? 8 : s->nmut;
    for (int i = 0; i < n; i++) {
        mut_init(&m[i], h, 88172645463325252ull + (uint64_t)i * GOLDEN, s->ops, s->write);
        if (i == 0) {
            m[i].notify = &started;
            m[i].notify_at = START_AFTER;
        }
        CHECK_EQ_INT(pthread_create(&th[i], NULL, mutate, &m[i]), 0);
    }
    /* The mutators fault alone for a while, then race the collector. */
    if (n > 0)
        wait_sem(&started);
    CHECK_EQ_INT(bm_compact_start(c), 0);
    int rc = bm_compact_finish(c, &st);
    CHECKF(rc == 0, "%s: finish: %d: %s", label, rc, bm_last_error());
    uint32_t *counts = calloc(h->nlive, sizeof(uint32_t));
    size_t wrong = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        wrong += m[i].wrong;
        for (size_t k = 0; k < h->nlive; k++)
            counts[k] += m[i].tally[k];
        free(m[i].tally);
    }
    note_stats(label, &st);
    sem_destroy(&started);
    CHECKF(n == 0 || st.faults > 0, "%s: the mutators ran before the collector but took no fault", label);
    CHECKF(wrong == 0, "%s: mutators read %zu wrong ids", label, wrong);
    size_t bad = verify_heap(h, counts, s->write, h->pages * PAGE);
    CHECKF(bad == 0, "%s: %zu objects or words wrong after finish", label, bad);
    check_stats(label, &st, h->pages);
    free(counts);
    if (out)
        *out = st;
    return bad == 0 && wrong == 0 && rc == 0;
}

/* compact_with_mutators in `mode` with the session most cases run: one
 * mutator of 20000 ops, writing; labelled "<what> <MODE>". */
static int compact_in_mode(heap_t *h, const char *what, unsigned mode, bm_compact_stats *out)
{
    char label[LABEL];
    snprintf(label, sizeof label, "%s %s", what, mode_name(mode));
    sess_t s = {mode, 1, 20000, 1, NULL};
    return compact_with_mutators(h, label, &s, out);
}

/* 1. mlockall(MCL_CURRENT | MCL_FUTURE) before prepare. */
static void case_mlockall(void)
{
    if (!need_sessions())
        return;
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        skip_case("mlockall: %s", strerror(errno));
        return;
    }
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        heap_t h;
        if (!CHECK(heap_new(&h, 2048, 64)))
            return;
        compact_in_mode(&h, "mlockall", all_modes[i], NULL);
        heap_free(&h);
    }
}

/* The signaller thread: sends `sig` to `target` with pthread_kill for
 * every kick (the target's page serves post g_kick), until *stop. */
typedef struct {
    pthread_t target;
    int sig;
    _Atomic int *stop;
    unsigned long sent;
} signaller_t;

static void *signaller(void *arg)
{
    signaller_t *s = arg;
    for (;;) {
        while (sem_wait(&g_kick) != 0 && errno == EINTR)
            ;
        if (atomic_load(s->stop))
            break;
        if (pthread_kill(s->target, s->sig) != 0)
            break;
        s->sent++;
    }
    return NULL;
}

static void block_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

/* Cases 2 and 4: `handler` for sig, which this thread blocks (the
 * mutator unblocks it); a page served on a signalled thread asks for sig. */
static void signal_on_kick(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    CHECK_EQ_INT(sigaction(sig, &sa, NULL), 0);
    block_signals();
    sem_init(&g_kick, 0, 0);
    g_kick_sig = sig;
}

/* Cases 2 to 4: h laid out again with a slow producer, the kick counts
 * zeroed, and prepared in `mode` (batch 16), labelled "<what> <MODE>"
 * into label (LABEL bytes); NULL (a failure) if refused. */
static bm_compaction *prepare_slow(heap_t *h, const char *what, unsigned mode, char *label)
{
    snprintf(label, LABEL, "%s %s", what, mode_name(mode));
    heap_reset(h);
    h->spin_ns = SLOW_NS;
    atomic_store(&g_kicks, 0);
    atomic_store(&g_arrived_in_serve, 0);
    bm_compact_options o = {mode, 1, 16, 0};
    bm_compaction *c = bm_compact_prepare(h->mem, h->pages * PAGE, produce, first_source, h, &o);
    CHECKF(c != NULL, "%s: prepare: %s", label, bm_last_error());
    return c;
}

/* Starts the collector and finishes the session, the stats into *st. */
static void start_and_finish(bm_compaction *c, const char *label, bm_compact_stats *st)
{
    CHECK_EQ_INT(bm_compact_start(c), 0);
    memset(st, 0, sizeof *st);
    int rc = bm_compact_finish(c, st);
    CHECKF(rc == 0, "%s: finish: %s", label, bm_last_error());
}

/* Cases 2 to 4, after finish: the producer at full speed again, the heap
 * checked (verify_heap's counts and counters). */
static void verify_slow(heap_t *h, const char *label, const uint32_t *counts, int counters)
{
    h->spin_ns = 0;
    size_t bad = verify_heap(h, counts, counters, h->pages * PAGE);
    CHECKF(bad == 0, "%s: %zu objects wrong", label, bad);
}

/* 2. A SIGUSR1 handler that reads heap objects, sent continuously to a
 * mutator while it faults pages a slow producer builds. */
static heap_t *g_h;
static _Atomic unsigned long g_usr1_runs, g_usr1_wrong;
static _Atomic uint64_t g_usr1_seed = 12345;

static void usr1_handler(int sig)
{
    (void)sig;
    int saved = errno;
    uint64_t x = atomic_fetch_add(&g_usr1_seed, GOLDEN) | 1;
    for (int j = 0; j < 8; j++)
        if (!heap_touch(g_h, xorshift(&x) % g_h->nlive, 0))
            atomic_fetch_add(&g_usr1_wrong, 1);
    atomic_fetch_add(&g_usr1_runs, 1);
    errno = saved;
}

static void case_signal_handler_reads_heap(void)
{
    if (!need_sessions())
        return;
    signal_on_kick(SIGUSR1, usr1_handler);
    heap_t h;
    if (!CHECK(heap_new(&h, 4096, 64)))
        return;
    g_h = &h;
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        char label[LABEL];
        bm_compaction *c = prepare_slow(&h, "SIGUSR1 reader", all_modes[i], label);
        if (!c)
            break;
        unsigned long runs0 = atomic_load(&g_usr1_runs);
        mut_t m;
        sem_t half;
        sem_init(&half, 0, 0);
        mut_init(&m, &h, 7 + i, 40000, 1);
        m.unblock = SIGUSR1;
        m.runs = &g_usr1_runs;
        m.min_runs = runs0 + 50;
        m.notify = &half;
        m.notify_at = m.ops / 2;
        m.signalled = 1;
        pthread_t mt, st_th;
        CHECK_EQ_INT(pthread_create(&mt, NULL, mutate, &m), 0);
        signaller_t sg = {mt, SIGUSR1, &m.finished, 0};
        CHECK_EQ_INT(pthread_create(&st_th, NULL, signaller, &sg), 0);
        /* The mutator faults (nearly) every live page itself, under the signals. */
        wait_sem(&half);
        unsigned long early = atomic_load(&g_usr1_runs) - runs0;
        bm_compact_stats st;
        start_and_finish(c, label, &st); /* the mutator and the signals go on */
        pthread_join(st_th, NULL);
        pthread_join(mt, NULL);
        unsigned long runs = atomic_load(&g_usr1_runs) - runs0;
        check_note("  %s: %lu pages served on the mutator, %lu signals arrived while one was "
                   "served; %lu sent, %lu handler runs (%lu before the collector started), %zu "
                   "mutator ops",
                   label, atomic_load(&g_kicks), atomic_load(&g_arrived_in_serve), sg.sent, runs,
                   early, atomic_load(&m.done));
        sem_destroy(&half);
        note_stats(label, &st);
        CHECKF(runs > 0, "%s: the handler never ran", label);
        CHECKF(atomic_load(&g_usr1_wrong) == 0, "%s: the handler read %lu wrong ids", label,
               atomic_load(&g_usr1_wrong));
        CHECKF(m.wrong == 0, "%s: the mutator read %zu wrong ids", label, m.wrong);
        verify_slow(&h, label, m.tally, 1);
        check_stats(label, &st, h.pages);
        free(m.tally);
    }
    heap_free(&h);
}

/* 3. Asynchronous cancellation of mutators while they fault: several
 * mutators in one session, each cancelled once it has done some ops, the
 * cancellation sent while a page of its is being served (the serve kicks
 * the main thread, which calls pthread_cancel). */
enum { CANCELS = 8, OPS_BEFORE_CANCEL = 40 };
#define GLIBC_SIGCANCEL 32 /* glibc's cancellation signal (__SIGRTMIN): only counted */
static _Atomic size_t g_cancel_ops, g_cancel_wrong;
static _Atomic uint64_t g_cancel_seed = 0x2545F4914F6CDD1Dull;

static void *cancel_mutator(void *arg)
{
    heap_t *h = arg;
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    uint64_t x = atomic_fetch_add(&g_cancel_seed, GOLDEN) | 1;
    for (size_t i = 0; i < 100000000; i++) {
        if (i == OPS_BEFORE_CANCEL)
            t_signalled = 1; /* from now on a page served here asks for the cancellation */
        size_t k = xorshift(&x) % h->nlive;
        _Atomic uint64_t *o = (_Atomic uint64_t *)(h->mem + k * OBJ);
        if (atomic_load_explicit(&o[0], memory_order_relaxed) != (uint64_t)h->live[k] + 1)
            atomic_fetch_add(&g_cancel_wrong, 1);
        atomic_fetch_add_explicit(&o[1], 1, memory_order_relaxed);
        atomic_fetch_add(&g_cancel_ops, 1);
    }
    pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old);
    return NULL; /* never cancelled */
}

static void case_async_cancel(void)
{
    if (!need_sessions())
        return;
    heap_t h;
    if (!CHECK(heap_new(&h, 4096, 64)))
        return;
    sem_init(&g_kick, 0, 0);
    g_kick_sig = GLIBC_SIGCANCEL;
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        atomic_store(&g_cancel_ops, 0);
        atomic_store(&g_cancel_wrong, 0);
        char label[LABEL];
        bm_compaction *c = prepare_slow(&h, "async cancel", all_modes[i], label);
        if (!c)
            break;
        int cancelled = 0;
        for (int r = 0; r < CANCELS; r++) {
            while (sem_trywait(&g_kick) == 0) /* kicks left by the last one */
                ;
            pthread_t mt;
            CHECK_EQ_INT(pthread_create(&mt, NULL, cancel_mutator, &h), 0);
            /* A page served for it after its first ops (its faults, which a
             * slow producer serves) kicks us. */
            wait_sem(&g_kick);
            CHECK_EQ_INT(pthread_cancel(mt), 0);
            void *res = NULL;
            CHECK_EQ_INT(pthread_join(mt, &res), 0);
            cancelled += res == PTHREAD_CANCELED;
        }
        CHECKF(cancelled == CANCELS, "%s: %d of %d mutators cancelled", label, cancelled, CANCELS);
        size_t ops = atomic_load(&g_cancel_ops);
        bm_compact_stats st;
        start_and_finish(c, label, &st);
        check_note("  %s: %d mutators cancelled (%lu cancellations seen arriving while a page was "
                   "served), %zu ops in all",
                   label, cancelled, atomic_load(&g_arrived_in_serve), ops);
        note_stats(label, &st);
        verify_slow(&h, label, NULL, 0);
        uint64_t sum = 0;
        for (size_t k = 0; k < h.nlive; k++)
            sum += ((const uint64_t *)(h.mem + k * OBJ))[1];
        /* Each cancellation may fall between the increment and the count. */
        CHECKF(sum >= ops && sum <= ops + CANCELS,
               "%s: counters sum to %llu, the mutators did %zu ops (%d cancelled)", label,
               (unsigned long long)sum, ops, CANCELS);
        CHECKF(atomic_load(&g_cancel_wrong) == 0, "%s: %zu wrong ids read", label,
               atomic_load(&g_cancel_wrong));
        CHECKF(st.faults > 0, "%s: no fault served before the cancellations", label);
        check_stats(label, &st, h.pages);
    }
    heap_free(&h);
}

/* 4. The time-out idiom: siglongjmp out of a SIGALRM handler, sent
 * continuously to a mutator inside sigsetjmp-protected rounds. */
static sigjmp_buf g_env;
static volatile sig_atomic_t g_armed;
static _Atomic unsigned long g_alrm_runs, g_alrm_missed, g_timeouts, g_rounds;
static _Atomic size_t g_touch_ops, g_touch_wrong;
static _Atomic uint64_t g_round_seed;
static _Atomic int g_touch_finished;
static size_t g_touch_target;
static sem_t g_touch_half;

static void alrm_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&g_alrm_runs, 1);
    if (!g_armed) {
        atomic_fetch_add(&g_alrm_missed, 1);
        return;
    }
    g_armed = 0;
    siglongjmp(g_env, 1);
}

static __attribute__((noinline)) void touch_objects(void)
{
    uint64_t x = atomic_fetch_add(&g_round_seed, GOLDEN) | 1;
    for (int j = 0; j < 256; j++) {
        if (!heap_touch(g_h, xorshift(&x) % g_h->nlive, 0))
            atomic_fetch_add(&g_touch_wrong, 1);
        atomic_fetch_add(&g_touch_ops, 1);
    }
}

static __attribute__((noinline)) void timeout_round(void)
{
    if (sigsetjmp(g_env, 1) == 0) {
        g_armed = 1;
        touch_objects();
        g_armed = 0;
        atomic_fetch_add(&g_rounds, 1);
    } else {
        atomic_fetch_add(&g_timeouts, 1);
    }
}

static void *timeout_mutator(void *arg)
{
    (void)arg;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    int posted = 0;
    unsigned long spins = 0;
    t_signalled = 1;
    while (atomic_load(&g_touch_ops) < g_touch_target || atomic_load(&g_alrm_runs) < 50) {
        timeout_round();
        if (atomic_load(&g_touch_ops) >= g_touch_target && (spins++ & 63) == 0)
            sem_post(&g_kick); /* every page built: ask for signals directly */
        /* Outside the armed region: a siglongjmp must not cut a sem_post short. */
        if (!posted && atomic_load(&g_touch_ops) >= g_touch_target / 2) {
            sem_post(&g_touch_half);
            posted = 1;
        }
    }
    t_signalled = 0;
    atomic_store(&g_touch_finished, 1);
    sem_post(&g_kick);
    return NULL;
}

static void case_siglongjmp_timeouts(void)
{
    if (!need_sessions())
        return;
    signal_on_kick(SIGALRM, alrm_handler);
    sem_init(&g_touch_half, 0, 0);
    heap_t h;
    if (!CHECK(heap_new(&h, 4096, 64)))
        return;
    g_h = &h;
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        atomic_store(&g_alrm_runs, 0);
        atomic_store(&g_alrm_missed, 0);
        atomic_store(&g_timeouts, 0);
        atomic_store(&g_rounds, 0);
        atomic_store(&g_touch_ops, 0);
        atomic_store(&g_touch_wrong, 0);
        atomic_store(&g_touch_finished, 0);
        g_touch_target = 100000;
        char label[LABEL];
        bm_compaction *c = prepare_slow(&h, "siglongjmp", all_modes[i], label);
        if (!c)
            break;
        pthread_t mt, st_th;
        CHECK_EQ_INT(pthread_create(&mt, NULL, timeout_mutator, NULL), 0);
        signaller_t sg = {mt, SIGALRM, &g_touch_finished, 0};
        CHECK_EQ_INT(pthread_create(&st_th, NULL, signaller, &sg), 0);
        wait_sem(&g_touch_half);
        unsigned long early = atomic_load(&g_timeouts);
        bm_compact_stats st;
        start_and_finish(c, label, &st);
        pthread_join(st_th, NULL);
        pthread_join(mt, NULL);
        check_note("  %s: %lu pages served on the mutator, %lu signals arrived while one was "
                   "served; %lu signals handled, %lu time-outs by siglongjmp (%lu before the "
                   "collector started), %lu outside rounds, %lu whole rounds, %zu touches",
                   label, atomic_load(&g_kicks), atomic_load(&g_arrived_in_serve),
                   atomic_load(&g_alrm_runs), atomic_load(&g_timeouts), early,
                   atomic_load(&g_alrm_missed), atomic_load(&g_rounds), atomic_load(&g_touch_ops));
        note_stats(label, &st);
        CHECKF(atomic_load(&g_touch_wrong) == 0, "%s: %zu wrong ids read", label,
               atomic_load(&g_touch_wrong));
        verify_slow(&h, label, NULL, 1); /* read only: counters 0 */
        check_stats(label, &st, h.pages);
    }
    heap_free(&h);
}

/* 5. Heaps prepare must refuse, the heap left as it was. */
static char g_maps_before[1 << 16], g_maps_after[1 << 16];

typedef struct {
    const char *label;
    char *addr;    /* the range passed */
    size_t len;
    const char *w1, *w2; /* words bm_last_error must hold (w2 may be NULL) */
} refusal_t;

static void expect_refusal(const refusal_t *r, const heap_t *h, int stw)
{
    size_t lines0 = maps_of(r->addr, r->len + 16 * PAGE, g_maps_before, sizeof g_maps_before);
    const char *err;
    if (stw) {
        bm_compact_stats st;
        int rc = bm_compact_stop_the_world(r->addr, r->len, produce, first_source, (void *)h, NULL, &st);
        CHECKF(rc == -EINVAL, "%s (stop the world): returned %d (%s)", r->label, rc, bm_last_error());
    } else {
        errno = 0;
        bm_compaction *c = bm_compact_prepare(r->addr, r->len, produce, first_source, (void *)h, NULL);
        CHECKF(c == NULL, "%s: prepare accepted the heap", r->label);
        if (c)
            bm_compact_finish(c, NULL);
        CHECKF(errno == EINVAL, "%s: errno %d, want EINVAL (%s)", r->label, errno, bm_last_error());
    }
    err = bm_last_error();
    check_note("  %s%s refused: %s", r->label, stw ? " (stop the world)" : "", err);
    CHECKF(strstr(err, r->w1) != NULL, "%s: \"%s\" not in: %s", r->label, r->w1, err);
    if (r->w2)
        CHECKF(strstr(err, r->w2) != NULL, "%s: \"%s\" not in: %s", r->label, r->w2, err);
    size_t lines1 = maps_of(r->addr, r->len + 16 * PAGE, g_maps_after, sizeof g_maps_after);
    CHECKF(strcmp(g_maps_before, g_maps_after) == 0, "%s: the heap's mappings changed:\n%s---\n%s",
           r->label, g_maps_before, g_maps_after);
    CHECKF(lines0 == lines1, "%s: the process had %zu mappings, now %zu", r->label, lines0, lines1);
}

static void case_refusals(void)
{
    const size_t N = 2048;
    int sess = g_support >= 0;
    if (!sess)
        check_note("  prepare refusals skipped (%s): stop the world only", g_support_why);
    heap_t h;
    /* Warm up: the first call installs the handler and allocates. */
    {
        char *m = mmap(NULL, 64 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(m + 32 * PAGE, PAGE);
        errno = 0;
        if (sess)
            CHECK(bm_compact_prepare(m, 64 * PAGE, produce, NULL, &h, NULL) == NULL);
        CHECK(bm_compact_stop_the_world(m, 64 * PAGE, produce, NULL, &h, NULL, NULL) == -EINVAL);
        munmap(m, 64 * PAGE);
    }

    /* (a) a hole in the middle */
    CHECK(heap_new(&h, N, 64));
    CHECK_EQ_INT(munmap(h.mem + 1000 * PAGE, PAGE), 0);
    refusal_t a = {"(a) hole", h.mem, N * PAGE, "nothing is mapped", NULL};
    for (int stw = !sess; stw < 2; stw++) {
        expect_refusal(&a, &h, stw);
        CHECKF(verify_original(&h, 1000, 1001) == 0, "(a): the heap changed");
    }
    heap_free(&h);

    /* (b) the range runs past its mapping */
    {
        char *m = mmap(NULL, (N + 16) * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED);
        CHECK_EQ_INT(munmap(m + N * PAGE, 16 * PAGE), 0);
        heap_at(&h, m, N, 64);
        CHECK(unmapped(m + N * PAGE, 16 * PAGE));
        refusal_t b = {"(b) runs past", m, (N + 16) * PAGE, "nothing is mapped", "runs past"};
        for (int stw = !sess; stw < 2; stw++) {
            expect_refusal(&b, &h, stw);
            CHECKF(verify_original(&h, N, N) == 0, "(b): the heap changed");
            CHECKF(unmapped(m + N * PAGE, 16 * PAGE), "(b): something is mapped past the heap now");
        }
        heap_free(&h);
    }

    /* (c) a PROT_NONE heap */
    CHECK(heap_new(&h, N, 64));
    CHECK_EQ_INT(mprotect(h.mem, N * PAGE, PROT_NONE), 0);
    refusal_t c = {"(c) PROT_NONE", h.mem, N * PAGE, "PROT_NONE", NULL};
    for (int stw = !sess; stw < 2; stw++)
        expect_refusal(&c, &h, stw);
    CHECK_EQ_INT(mprotect(h.mem, N * PAGE, PROT_READ | PROT_WRITE), 0);
    CHECKF(verify_original(&h, 0, 0) == 0, "(c): the heap changed");
    heap_free(&h);

    /* (d) one read-only page in the middle */
    CHECK(heap_new(&h, N, 64));
    CHECK_EQ_INT(mprotect(h.mem + 1000 * PAGE, PAGE, PROT_READ), 0);
    refusal_t d = {"(d) read-only page", h.mem, N * PAGE, "read-only", NULL};
    for (int stw = !sess; stw < 2; stw++) {
        expect_refusal(&d, &h, stw);
        CHECKF(verify_original(&h, 0, 0) == 0, "(d): the heap changed");
    }
    /* Repaired, it compacts: the refusals left no slot taken. */
    CHECK_EQ_INT(mprotect(h.mem + 1000 * PAGE, PAGE, PROT_READ | PROT_WRITE), 0);
    bm_compact_stats st;
    int rc = bm_compact_stop_the_world(h.mem, N * PAGE, produce, first_source, &h, NULL, &st);
    CHECKF(rc == 0, "(d) repaired: stop the world: %s", bm_last_error());
    CHECKF(verify_heap(&h, NULL, 1, N * PAGE) == 0, "(d) repaired: heap wrong");
    heap_free(&h);
}

/* 5b. A heap spanning several mappings (the header allows it): a plain
 * part, an mlock()ed part and a MADV_HUGEPAGE part, compacted with a
 * mutator. */
static void case_several_mappings(void)
{
    if (!need_sessions())
        return;
    const unsigned modes[] = {BM_COMPACT_AUTO, BM_COMPACT_MOVE, BM_COMPACT_COPY};
    const size_t N = 2048, third = 1024;
    for (size_t i = 0; next_mode(modes, 3, &i); i++) {
        heap_t h;
        if (!CHECK(heap_new(&h, N, 64)))
            return;
        int locked = mlock(h.mem + third * PAGE, 512 * PAGE) == 0;
        madvise(h.mem + (third + 512) * PAGE, (N - third - 512) * PAGE, MADV_HUGEPAGE);
        char maps[4096];
        maps_of(h.mem, N * PAGE, maps, sizeof maps);
        size_t pieces = 0;
        for (const char *q = maps; (q = strchr(q, '\n')) != NULL; q++)
            pieces++;
        char what[LABEL];
        snprintf(what, sizeof what, "several mappings (%zu%s)", pieces,
                 locked ? ", one mlocked" : ", mlock refused");
        CHECKF(pieces >= 2, "%s %s: the heap is one mapping:\n%s", what, mode_name(modes[i]), maps);
        compact_in_mode(&h, what, modes[i], NULL);
        heap_free(&h);
    }
}

/* Cases 6 and 15: two heaps, 2048 pages (64 dense) and 3072 (none), each
 * with a writing mutator of 20000 ops. */
typedef struct {
    heap_t h1, h2;
    mut_t m1, m2;
    sem_t e1, e2;
    pthread_t t1, t2;
} pair_t;

static void pair_new(pair_t *p)
{
    CHECK(heap_new(&p->h1, 2048, 64));
    CHECK(heap_new(&p->h2, 3072, 0));
}

/* The mutators started (seeds seed and seed + 1); returns once both have
 * faulted alone for START_AFTER ops: the caller starts the collector. */
static void pair_start(pair_t *p, uint64_t seed)
{
    start_mutator(&p->m1, &p->t1, &p->e1, &p->h1, seed);
    start_mutator(&p->m2, &p->t2, &p->e2, &p->h2, seed + 1);
    wait_sem(&p->e1);
    wait_sem(&p->e2);
}

static void pair_join(pair_t *p)
{
    pthread_join(p->t1, NULL);
    pthread_join(p->t2, NULL);
}

/* After finish: no wrong id read, both heaps compacted with every
 * increment ("<what> 1 wrong" if not). */
static void pair_verify(const pair_t *p, const char *what)
{
    CHECK_EQ_SIZE(p->m1.wrong + p->m2.wrong, 0);
    CHECKF(verify_heap(&p->h1, p->m1.tally, 1, p->h1.pages * PAGE) == 0, "%s 1 wrong", what);
    CHECKF(verify_heap(&p->h2, p->m2.tally, 1, p->h2.pages * PAGE) == 0, "%s 2 wrong", what);
}

static void pair_free(pair_t *p)
{
    free(p->m1.tally);
    free(p->m2.tally);
    heap_free(&p->h1);
    heap_free(&p->h2);
}

/* 6. A second session overlapping a live one is refused; two disjoint
 * sessions live at once both work. */
static void case_overlapping_sessions(void)
{
    if (!need_sessions())
        return;
    const size_t N = 2048, EXTRA = 1024;
    heap_t h;
    char *m = mmap(NULL, (N + EXTRA) * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!CHECK(m != MAP_FAILED))
        return;
    heap_at(&h, m, N, 64);
    memset(m + N * PAGE, 0x5A, EXTRA * PAGE);
    bm_compaction *a = bm_compact_prepare(m, N * PAGE, produce, first_source, &h, NULL);
    if (!CHECKF(a != NULL, "prepare A: %s", bm_last_error()))
        return;
    mut_t mu;
    sem_t early;
    pthread_t mt;
    start_mutator(&mu, &mt, &early, &h, 99);
    struct {
        const char *what;
        char *at;
        size_t len;
    } over[] = {
        {"upper half of A and more", m + N / 2 * PAGE, N * PAGE},
        {"A exactly", m, N * PAGE},
        {"one page inside A", m + 7 * PAGE, PAGE},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        errno = 0;
        bm_compaction *b = bm_compact_prepare(over[i].at, over[i].len, produce, first_source, &h, NULL);
        CHECKF(b == NULL, "overlap (%s) accepted", over[i].what);
        if (b)
            bm_compact_finish(b, NULL);
        const char *err = bm_last_error();
        check_note("  overlap (%s) refused: %s", over[i].what, err);
        CHECKF(strstr(err, "overlaps") != NULL, "overlap (%s): \"overlaps\" not in: %s", over[i].what, err);
        CHECKF(errno == EINVAL, "overlap (%s): errno %d", over[i].what, errno);
    }
    size_t extra_bad = 0;
    for (size_t b = N * PAGE; b < (N + EXTRA) * PAGE; b++)
        extra_bad += (unsigned char)m[b] != 0x5A;
    CHECKF(extra_bad == 0, "the %zu bytes past A changed: %zu", EXTRA * PAGE, extra_bad);
    wait_sem(&early);
    CHECK_EQ_INT(bm_compact_start(a), 0);
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    CHECKF(bm_compact_finish(a, &st) == 0, "finish A: %s", bm_last_error());
    pthread_join(mt, NULL);
    note_stats("A with overlaps refused", &st);
    CHECK(st.faults > 0);
    CHECK_EQ_SIZE(mu.wrong, 0);
    CHECKF(verify_heap(&h, mu.tally, 1, N * PAGE) == 0, "A: heap wrong");
    check_stats("A", &st, N);
    free(mu.tally);
    munmap(m, (N + EXTRA) * PAGE);
    free(h.live);

    /* A live session's from-space is no heap either: a collector with a
     * stale pointer must not get it compacted under the session. (With no
     * first_source nothing is released early, so it is one mapping of the
     * heap's size, an odd one to find it.) */
    {
        heap_t hf;
        CHECK(heap_new(&hf, 1500, 0));
        bm_compaction *cf = bm_compact_prepare(hf.mem, hf.pages * PAGE, produce, NULL, &hf, NULL);
        if (CHECKF(cf != NULL, "from-space session: %s", bm_last_error())) {
            char *from = mapping_of_size(hf.pages * PAGE, hf.mem);
            if (!from) {
                check_note("  the from-space was not found in /proc/self/maps: not checked");
            } else {
                errno = 0;
                bm_compaction *b = bm_compact_prepare(from, hf.pages * PAGE, produce, NULL, &hf, NULL);
                const char *err = bm_last_error();
                check_note("  prepare over the from-space: %s", b ? "accepted" : err);
                CHECKF(b == NULL, "prepare accepted a live session's from-space");
                if (b)
                    bm_compact_finish(b, NULL);
                CHECKF(strstr(err, "overlaps") && strstr(err, "from-space"), "not an overlap: %s", err);
                int rc = bm_compact_stop_the_world(from, PAGE, produce, NULL, &hf, NULL, NULL);
                err = bm_last_error();
                check_note("  stop the world over the from-space: %d: %s", rc, rc ? err : "done");
                CHECKF(rc == -EINVAL && strstr(err, "from-space"), "stop the world over the from-space: %d: %s",
                       rc, err);
            }
            bm_compact_stats sf;
            CHECKF(bm_compact_finish(cf, &sf) == 0, "from-space session: finish: %s", bm_last_error());
            CHECKF(verify_heap(&hf, NULL, 1, hf.pages * PAGE) == 0, "from-space session: heap wrong");
        }
        heap_free(&hf);
    }

    /* Two disjoint heaps in two live sessions. */
    pair_t p;
    pair_new(&p);
    bm_compaction *c1 = bm_compact_prepare(p.h1.mem, p.h1.pages * PAGE, produce, first_source, &p.h1, NULL);
    bm_compact_options o2 = {BM_COMPACT_COPY, 2, 8, 0};
    bm_compaction *c2 = bm_compact_prepare(p.h2.mem, p.h2.pages * PAGE, produce, first_source, &p.h2, &o2);
    CHECKF(c1 != NULL, "session 1: %s", bm_last_error());
    CHECKF(c2 != NULL, "session 2: %s", bm_last_error());
    if (!c1 || !c2)
        return;
    pair_start(&p, 3);
    CHECK_EQ_INT(bm_compact_start(c1), 0);
    CHECK_EQ_INT(bm_compact_start(c2), 0);
    bm_compact_stats s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    CHECKF(bm_compact_finish(c2, &s2) == 0, "finish 2: %s", bm_last_error());
    CHECKF(bm_compact_finish(c1, &s1) == 0, "finish 1: %s", bm_last_error());
    pair_join(&p);
    note_stats("disjoint session 1", &s1);
    note_stats("disjoint session 2", &s2);
    CHECK(s1.faults > 0 && s2.faults > 0);
    pair_verify(&p, "disjoint heap");
    check_stats("disjoint 1", &s1, p.h1.pages);
    check_stats("disjoint 2", &s2, p.h2.pages);
    pair_free(&p);
}

/* Cases 7 and 8: the heap laid out in m (pages pages, 64 dense; m is
 * unmapped after) and compacted in `mode` by one writing mutator; no page
 * may be moved out of it, `memory` (the header: such memory is copied). */
static void compact_unmovable(char *m, size_t pages, const char *what, unsigned mode, const char *memory)
{
    heap_t h;
    heap_at(&h, m, pages, 64);
    bm_compact_stats st;
    compact_in_mode(&h, what, mode, &st);
    CHECKF(st.moved == 0, "%s %s: %zu pages moved out of %s (the header: copied)", what,
           mode_name(mode), st.moved, memory);
    heap_free(&h);
}

/* 7. A MAP_SHARED memfd heap. */
static void case_memfd(void)
{
    if (!need_sessions())
        return;
    const size_t N = 2048;
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        int fd = memfd_create("bulkmem-hostile-heap", MFD_CLOEXEC);
        if (fd < 0) {
            skip_case("memfd_create: %s", strerror(errno));
            return;
        }
        CHECK_EQ_INT(ftruncate(fd, (off_t)(N * PAGE)), 0);
        char *m = mmap(NULL, N * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (!CHECK(m != MAP_FAILED))
            return;
        compact_unmovable(m, N, "memfd MAP_SHARED", all_modes[i], "a shared mapping");
    }
}

/* 8. A hugetlb heap (the parent reserves huge pages if it must). */
static void case_hugetlb(void)
{
    if (!need_sessions())
        return;
    const size_t LEN = 8 << 20;
    for (size_t i = 0; next_mode(all_modes, 3, &i); i++) {
        char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (m == MAP_FAILED) {
            skip_case("mmap(MAP_HUGETLB, 8 MiB): %s (no huge pages reserved)", strerror(errno));
            return;
        }
        compact_unmovable(m, LEN / PAGE, "hugetlb", all_modes[i], "hugetlb memory");
    }
}

/* 9. An mlock()ed heap. */
static void case_mlock(void)
{
    if (!need_sessions())
        return;
    const unsigned modes[] = {BM_COMPACT_AUTO, BM_COMPACT_MOVE};
    for (size_t i = 0; next_mode(modes, 2, &i); i++) {
        heap_t h;
        if (!CHECK(heap_new(&h, 2048, 64)))
            return;
        if (mlock(h.mem, h.pages * PAGE) != 0) {
            skip_case("mlock: %s", strerror(errno));
            heap_free(&h);
            return;
        }
        compact_in_mode(&h, "mlock", modes[i], NULL);
        heap_free(&h);
    }
}

/* 10. The heap made read-only during the session. */
static void make_read_only(heap_t *h)
{
    CHECKF(mprotect(h->mem, h->pages * PAGE, PROT_READ) == 0, "mprotect: %s", strerror(errno));
}

static void case_read_only_during_session(void)
{
    if (!need_sessions())
        return;
    const unsigned modes[] = {BM_COMPACT_AUTO, BM_COMPACT_MOVE, BM_COMPACT_COPY};
    for (size_t i = 0; next_mode(modes, 3, &i); i++) {
        heap_t h;
        if (!CHECK(heap_new(&h, 2048, 64)))
            return;
        char label[LABEL];
        snprintf(label, sizeof label, "read-only in session %s", mode_name(modes[i]));
        sess_t s = {modes[i], 1, 20000, 0, make_read_only};
        compact_with_mutators(&h, label, &s, NULL);
        char maps[4096];
        maps_of(h.mem, h.pages * PAGE, maps, sizeof maps);
        check_note("  %s: the heap's mappings after finish:\n%.*s", label,
                   (int)(strlen(maps) ? strlen(maps) - 1 : 0), maps);
        heap_free(&h);
    }
}

/* 11. A seccomp filter refusing userfaultfd(2). */
#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#endif

static int refuse_userfaultfd(void)
{
    struct sock_filter f[] = {
#ifdef SECCOMP_ARCH
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
#endif
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static void stop_the_world_works(const char *label)
{
    heap_t h;
    if (!CHECK(heap_new(&h, 2048, 64)))
        return;
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    int rc = bm_compact_stop_the_world(h.mem, h.pages * PAGE, produce, first_source, &h, NULL, &st);
    CHECKF(rc == 0, "%s: stop the world: %d: %s", label, rc, bm_last_error());
    CHECKF(verify_heap(&h, NULL, 1, h.pages * PAGE) == 0, "%s: stop the world: heap wrong", label);
    CHECK_EQ_SIZE(st.by_collector, h.pages);
    heap_free(&h);
}

static void case_seccomp(void)
{
    if (refuse_userfaultfd() != 0) {
        skip_case("cannot install a seccomp filter: %s", strerror(errno));
        return;
    }
    errno = 0;
    CHECKF(syscall(__NR_userfaultfd, 0) < 0 && errno == ENOSYS, "the filter does not answer ENOSYS");
    int s = bm_compact_supported();
    const char *err = bm_last_error();
    check_note("  bm_compact_supported() under the filter: %d: %s", s, err);
    CHECKF(s < 0, "bm_compact_supported() says %d under a filter refusing userfaultfd", s);
    CHECKF(strstr(err, "seccomp") != NULL, "\"seccomp\" not in: %s", err);
    stop_the_world_works("seccomp");
}

/* 11b. The filter installed after the process asked (and got yes):
 * prepare itself must refuse cleanly, the heap untouched. */
static void case_seccomp_after_asking(void)
{
    if (!need_sessions())
        return;
    int s0 = bm_compact_supported();
    if (refuse_userfaultfd() != 0) {
        skip_case("cannot install a seccomp filter: %s", strerror(errno));
        return;
    }
    int s1 = bm_compact_supported();
    check_note("  bm_compact_supported(): %d before the filter, %d after (%s)", s0, s1,
               s1 < 0 ? bm_last_error() : "a remembered answer");
    heap_t h;
    if (!CHECK(heap_new(&h, 2048, 64)))
        return;
    size_t lines0 = maps_of(h.mem, h.pages * PAGE, g_maps_before, sizeof g_maps_before);
    errno = 0;
    bm_compaction *c = bm_compact_prepare(h.mem, h.pages * PAGE, produce, first_source, &h, NULL);
    const char *err = bm_last_error();
    check_note("  prepare under the filter: %s", c ? "accepted" : err);
    CHECKF(c == NULL, "prepare accepted under a filter refusing userfaultfd");
    if (c)
        bm_compact_finish(c, NULL);
    CHECKF(strstr(err, "seccomp") != NULL, "\"seccomp\" not in: %s", err);
    size_t lines1 = maps_of(h.mem, h.pages * PAGE, g_maps_after, sizeof g_maps_after);
    CHECK(strcmp(g_maps_before, g_maps_after) == 0);
    CHECK_EQ_SIZE(lines0, lines1);
    CHECKF(verify_original(&h, 0, 0) == 0, "the heap changed");
    heap_free(&h);
    stop_the_world_works("seccomp after asking");
}

/* 12. RLIMIT_AS leaves no room for the from-space. */
static void case_rlimit_as(void)
{
    if (!need_sessions())
        return;
    heap_t h;
    if (!CHECK(heap_new(&h, 4096, 64)))
        return;
    size_t len = h.pages * PAGE;
    /* Once, to have the handler installed and the one-time work done. */
    {
        heap_t w;
        CHECK(heap_new(&w, 64, 0));
        bm_compaction *c = bm_compact_prepare(w.mem, w.pages * PAGE, produce, first_source, &w, NULL);
        CHECKF(c != NULL, "warm-up prepare: %s", bm_last_error());
        if (c)
            CHECK_EQ_INT(bm_compact_finish(c, NULL), 0);
        heap_free(&w);
    }
    long kb = vm_size_kb();
    if (!CHECKF(kb > 0, "VmSize unreadable"))
        return;
    struct rlimit old, lim;
    CHECK_EQ_INT(getrlimit(RLIMIT_AS, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)kb * 1024 + len / 2;
    if (setrlimit(RLIMIT_AS, &lim) != 0) {
        skip_case("setrlimit(RLIMIT_AS): %s", strerror(errno));
        return;
    }
    size_t lines0 = maps_of(h.mem, len, g_maps_before, sizeof g_maps_before);
    errno = 0;
    bm_compaction *c = bm_compact_prepare(h.mem, len, produce, first_source, &h, NULL);
    int e = errno;
    const char *err = bm_last_error();
    check_note("  RLIMIT_AS VmSize + %zu KiB: %s", len / 2048, c ? "accepted" : err);
    CHECKF(c == NULL, "prepare accepted a heap with no room for its from-space");
    if (c)
        bm_compact_finish(c, NULL);
    CHECKF(strstr(err, "address space") != NULL, "\"address space\" not in: %s", err);
    CHECKF(e == EINVAL || e == ENOMEM, "errno %d", e);
    size_t lines1 = maps_of(h.mem, len, g_maps_after, sizeof g_maps_after);
    CHECKF(strcmp(g_maps_before, g_maps_after) == 0, "the heap's mappings changed:\n%s---\n%s",
           g_maps_before, g_maps_after);
    CHECKF(lines0 == lines1, "the process had %zu mappings, now %zu", lines0, lines1);
    CHECKF(verify_original(&h, 0, 0) == 0, "the heap changed");
    /* Room for the from-space but not for the 1 GiB-congruent reservation
     * (heap + 1 GiB): the session falls back to a smaller alignment and
     * works, with a mutator, thread stacks and buffers under the limit. */
    CHECK_EQ_INT(setrlimit(RLIMIT_AS, &old), 0);
    kb = vm_size_kb();
    lim = old;
    lim.rlim_cur = (rlim_t)kb * 1024 + len + (64 << 20);
    CHECK_EQ_INT(setrlimit(RLIMIT_AS, &lim), 0);
    sess_t s = {BM_COMPACT_AUTO, 1, 20000, 1, NULL};
    bm_compact_stats st;
    compact_with_mutators(&h, "RLIMIT_AS VmSize + heap + 64 MiB", &s, &st);
    check_note("  pause %.0f us under the tight limit", st.pause_us);
    /* With the limit lifted, the same heap compacts again. */
    CHECK_EQ_INT(setrlimit(RLIMIT_AS, &old), 0);
    heap_reset(&h);
    compact_with_mutators(&h, "RLIMIT_AS lifted", &s, NULL);
    heap_free(&h);
}

/* 13. More threads faulting at once than there are staging buffers (the
 * mutators' page buffers: 64). The producer holds the first crowd inside
 * itself until 64 builds run at once and every reader has started
 * touching (or 200 ms passed), so the others fault while every buffer is
 * taken. */
enum { READERS = 80, BUFFERS = 64 };
static _Atomic int g_inside, g_max_inside, g_gate_open, g_touching;

static int produce_crowd(void *ctx, size_t page, const void *from, void *out)
{
    int n = atomic_fetch_add(&g_inside, 1) + 1;
    int mx = atomic_load(&g_max_inside);
    while (n > mx && !atomic_compare_exchange_weak(&g_max_inside, &mx, n))
        ;
    if (atomic_load(&g_gate_open)) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (;;) {
            if (!atomic_load(&g_gate_open))
                break;
            n = atomic_load(&g_inside);
            mx = atomic_load(&g_max_inside);
            while (n > mx && !atomic_compare_exchange_weak(&g_max_inside, &mx, n))
                ;
            clock_gettime(CLOCK_MONOTONIC, &b);
            long ns = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
            if ((n >= BUFFERS && atomic_load(&g_touching) >= READERS) || ns > 200 * 1000000L) {
                atomic_store(&g_gate_open, 0);
                break;
            }
        }
    }
    int r = produce(ctx, page, from, out);
    atomic_fetch_sub(&g_inside, 1);
    return r;
}

typedef struct {
    heap_t *h;
    int t, n;
    pthread_barrier_t *b;
    size_t wrong, read;
} reader_t;

static void *page_reader(void *arg)
{
    reader_t *r = arg;
    pthread_barrier_wait(r->b);
    atomic_fetch_add(&g_touching, 1);
    size_t lp = live_pages(r->h);
    for (size_t p = (size_t)r->t; p < lp; p += (size_t)r->n)
        for (size_t k = p * PER_PAGE; k < (p + 1) * PER_PAGE && k < r->h->nlive; k++) {
            const volatile uint64_t *o = (const volatile uint64_t *)(r->h->mem + k * OBJ);
            if (o[0] != (uint64_t)r->h->live[k] + 1 || o[1] != 0)
                r->wrong++;
            r->read++;
        }
    return NULL;
}

static void case_many_threads(void)
{
    if (!need_sessions())
        return;
    heap_t h;
    if (!CHECK(heap_new(&h, 8192, 64)))
        return;
    h.spin_ns = SLOW_NS;
    atomic_store(&g_gate_open, 1);
    bm_compact_options o = {BM_COMPACT_AUTO, 1, 16, 0};
    bm_compaction *c = bm_compact_prepare(h.mem, h.pages * PAGE, produce_crowd, first_source, &h, &o);
    if (!CHECKF(c != NULL, "prepare: %s", bm_last_error()))
        return;
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, READERS + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    static reader_t r[READERS];
    pthread_t th[READERS];
    for (int t = 0; t < READERS; t++) {
        r[t] = (reader_t){&h, t, READERS, &b, 0, 0};
        if (!CHECKF(pthread_create(&th[t], &attr, page_reader, &r[t]) == 0, "thread %d", t)) {
            fflush(stdout);
            _exit(1); /* the barrier would never fill */
        }
    }
    pthread_barrier_wait(&b);
    /* The collector joins once the crowd has formed (or all are done). */
    while (atomic_load(&g_gate_open))
        sched_yield();
    CHECK_EQ_INT(bm_compact_start(c), 0);
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    CHECKF(bm_compact_finish(c, &st) == 0, "finish: %s", bm_last_error());
    size_t wrong = 0, read = 0;
    for (int t = 0; t < READERS; t++) {
        pthread_join(th[t], NULL);
        wrong += r[t].wrong;
        read += r[t].read;
    }
    check_note("  80 readers: at most %d pages built at once (%d buffers)%s", atomic_load(&g_max_inside),
               BUFFERS,
               atomic_load(&g_max_inside) >= BUFFERS ? "" : ": the buffers were never all taken");
    note_stats("80 readers", &st);
    CHECK_EQ_SIZE(wrong, 0);
    CHECK_EQ_SIZE(read, h.nlive);
    h.spin_ns = 0;
    CHECKF(verify_heap(&h, NULL, 1, h.pages * PAGE) == 0, "80 readers: heap wrong");
    check_stats("80 readers", &st, h.pages);
    pthread_barrier_destroy(&b);
    heap_free(&h);
}

/* 14. Every thread racing on one object right after prepare. */
enum { RACERS = 16, RACE_INCS = 100, RACE_SESSIONS = 50 };
static pthread_barrier_t g_race_start, g_race_done;
static heap_t g_race_heap;
static size_t g_race_target;
static int g_race_stop;
static _Atomic size_t g_race_wrong;

static void *racer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_barrier_wait(&g_race_start);
        if (g_race_stop)
            return NULL;
        const heap_t *h = &g_race_heap;
        _Atomic uint64_t *o = (_Atomic uint64_t *)(h->mem + g_race_target * OBJ);
        for (int i = 0; i < RACE_INCS; i++) {
            if (atomic_load_explicit(&o[0], memory_order_relaxed) != (uint64_t)h->live[g_race_target] + 1)
                atomic_fetch_add(&g_race_wrong, 1);
            atomic_fetch_add_explicit(&o[1], 1, memory_order_relaxed);
        }
        pthread_barrier_wait(&g_race_done);
    }
}

static void case_one_page_race(void)
{
    if (!need_sessions())
        return;
    heap_t *h = &g_race_heap;
    if (!CHECK(heap_new(h, 2048, 64)))
        return;
    pthread_barrier_init(&g_race_start, NULL, RACERS + 1);
    pthread_barrier_init(&g_race_done, NULL, RACERS + 1);
    pthread_t th[RACERS];
    for (int t = 0; t < RACERS; t++)
        CHECK_EQ_INT(pthread_create(&th[t], NULL, racer, NULL), 0);
    uint32_t *counts = calloc(h->nlive, sizeof(uint32_t));
    bm_compact_stats sum;
    memset(&sum, 0, sizeof sum);
    size_t bad_sessions = 0;
    for (int s = 0; s < RACE_SESSIONS; s++) {
        unsigned mode = all_modes[s % 3];
        if (mode == BM_COMPACT_MOVE && g_support != 1)
            mode = BM_COMPACT_AUTO;
        heap_reset(h);
        g_race_target = ((size_t)s * 997 + 5) % h->nlive;
        bm_compact_options o = {mode, 1, 32, 0};
        bm_compaction *c = bm_compact_prepare(h->mem, h->pages * PAGE, produce, first_source, h, &o);
        if (!CHECKF(c != NULL, "session %d: prepare: %s", s, bm_last_error()))
            break;
        if (s % 2)
            CHECK_EQ_INT(bm_compact_start(c), 0);
        pthread_barrier_wait(&g_race_start);
        pthread_barrier_wait(&g_race_done);
        bm_compact_stats st;
        memset(&st, 0, sizeof st);
        CHECKF(bm_compact_finish(c, &st) == 0, "session %d: finish: %s", s, bm_last_error());
        counts[g_race_target] = RACERS * RACE_INCS;
        size_t bad = verify_heap(h, counts, 1, h->pages * PAGE);
        counts[g_race_target] = 0;
        if (bad) {
            bad_sessions++;
            fprintf(stderr, "    session %d (%s, target %zu): %zu wrong\n", s, mode_name(mode),
                    g_race_target, bad);
        }
        check_stats("one-page race", &st, h->pages);
        sum.faults += st.faults;
        sum.waits += st.waits;
        sum.refaults += st.refaults;
        sum.moved += st.moved;
        sum.copied += st.copied;
        sum.move_fallbacks += st.move_fallbacks;
        sum.eexist += st.eexist;
        sum.failed += st.failed;
        sum.pages += st.pages;
        sum.by_mutators += st.by_mutators;
    }
    g_race_stop = 1;
    pthread_barrier_wait(&g_race_start);
    for (int t = 0; t < RACERS; t++)
        pthread_join(th[t], NULL);
    check_note("  %d sessions, 16 racers: faults %zu waits %zu refaults %zu by_mutators %zu moved %zu "
               "copied %zu move_fallbacks %zu eexist %zu failed %zu",
               RACE_SESSIONS, sum.faults, sum.waits, sum.refaults, sum.by_mutators, sum.moved,
               sum.copied, sum.move_fallbacks, sum.eexist, sum.failed);
    CHECKF(bad_sessions == 0, "%zu of %d sessions lost or garbled increments", bad_sessions, RACE_SESSIONS);
    CHECK_EQ_SIZE(atomic_load(&g_race_wrong), 0);
    free(counts);
    heap_free(h);
}

/* 15. Several spaces in one pause; a refused second space. */
static void case_spaces(void)
{
    if (!need_sessions())
        return;
    pair_t p;
    pair_new(&p);
    p.h1.spin_ns = SLOW_NS / 3;
    bm_compact_space sp[2] = {
        {p.h1.mem, p.h1.pages * PAGE, produce, first_source, last_source, &p.h1},
        {p.h2.mem, p.h2.pages * PAGE, produce, first_source, last_source, &p.h2},
    };
    bm_compaction *c = bm_compact_prepare_spaces(sp, 2, NULL);
    if (!CHECKF(c != NULL, "prepare_spaces: %s", bm_last_error()))
        return;
    pair_start(&p, 5);
    CHECK_EQ_INT(bm_compact_start(c), 0);
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    CHECKF(bm_compact_finish(c, &st) == 0, "finish: %s", bm_last_error());
    pair_join(&p);
    note_stats("two spaces", &st);
    CHECK(st.faults > 0);
    p.h1.spin_ns = 0;
    pair_verify(&p, "space");
    check_stats("two spaces", &st, p.h1.pages + p.h2.pages);
    pair_free(&p);

    /* A PROT_NONE second space: refused, the first untouched. */
    heap_t h3, h4;
    CHECK(heap_new(&h3, 2048, 64));
    CHECK(heap_new(&h4, 64, 0));
    CHECK_EQ_INT(mprotect(h4.mem, h4.pages * PAGE, PROT_NONE), 0);
    bm_compact_space bad[2] = {
        {h3.mem, h3.pages * PAGE, produce, first_source, last_source, &h3},
        {h4.mem, h4.pages * PAGE, produce, first_source, last_source, &h4},
    };
    size_t lines0 = maps_of(h3.mem, h3.pages * PAGE, g_maps_before, sizeof g_maps_before);
    errno = 0;
    bm_compaction *r = bm_compact_prepare_spaces(bad, 2, NULL);
    int e = errno;
    const char *err = bm_last_error();
    check_note("  second space PROT_NONE: %s", r ? "accepted" : err);
    CHECKF(r == NULL, "prepare_spaces accepted a PROT_NONE space");
    if (r)
        bm_compact_finish(r, NULL);
    CHECK_EQ_INT(e, EINVAL);
    CHECKF(strstr(err, "PROT_NONE") != NULL, "\"PROT_NONE\" not in: %s", err);
    size_t lines1 = maps_of(h3.mem, h3.pages * PAGE, g_maps_after, sizeof g_maps_after);
    CHECKF(strcmp(g_maps_before, g_maps_after) == 0, "the first space's mappings changed:\n%s---\n%s",
           g_maps_before, g_maps_after);
    CHECKF(lines0 == lines1, "the process had %zu mappings, now %zu", lines0, lines1);
    CHECKF(verify_original(&h3, 0, 0) == 0, "the first space changed");
    /* And it can be compacted afterwards: nothing of the refusal is left. */
    sess_t s = {BM_COMPACT_AUTO, 1, 20000, 1, NULL};
    compact_with_mutators(&h3, "first space alone after the refusal", &s, NULL);
    CHECK_EQ_INT(mprotect(h4.mem, h4.pages * PAGE, PROT_READ | PROT_WRITE), 0);
    heap_free(&h3);
    heap_free(&h4);
}

/* 16. Allocation during a session: ensure the free tail in 2 MiB pieces
 * and fill it. */
static void allocate_in_session(unsigned mode, int use_ensure, int collector)
{
    heap_t h;
    if (!CHECK(heap_new(&h, 8192, 0)))
        return;
    const size_t piece = HUGE_PAGE / PAGE; /* 512 pages */
    size_t tail = (live_pages(&h) + piece - 1) / piece * piece;
    size_t pieces = (h.pages - tail) / piece;
    char label[96];
    snprintf(label, sizeof label, "allocate %s %s%s", mode_name(mode),
             use_ensure ? "with ensure" : "without ensure", collector ? ", collector running" : "");
    bm_compact_options o = {mode, 1, 32, 0};
    bm_compaction *c = bm_compact_prepare(h.mem, h.pages * PAGE, produce, first_source, &h, &o);
    if (!CHECKF(c != NULL, "%s: prepare: %s", label, bm_last_error()))
        return;
    if (collector)
        CHECK_EQ_INT(bm_compact_start(c), 0);
    for (size_t i = 0; i < pieces; i++) {
        char *at = h.mem + (tail + i * piece) * PAGE;
        if (use_ensure)
            CHECKF(bm_compact_ensure(c, at, HUGE_PAGE) == 0, "%s: ensure: %s", label, bm_last_error());
        memset(at, (int)(0xC0 + i), HUGE_PAGE);
    }
    bm_compact_stats st;
    memset(&st, 0, sizeof st);
    CHECKF(bm_compact_finish(c, &st) == 0, "%s: finish: %s", label, bm_last_error());
    check_note("  %s: %zu pieces of 2 MiB from page %zu", label, pieces, tail);
    note_stats(label, &st);
    if (use_ensure)
        CHECKF(st.faults <= pieces, "%s: %zu faults for %zu pieces allocated", label, st.faults, pieces);
    CHECKF(verify_heap(&h, NULL, 1, tail * PAGE) == 0, "%s: heap wrong", label);
    size_t wrong = 0;
    for (size_t i = 0; i < pieces; i++) {
        const unsigned char *at = (const unsigned char *)h.mem + (tail + i * piece) * PAGE;
        for (size_t b = 0; b < HUGE_PAGE; b++)
            wrong += at[b] != (unsigned char)(0xC0 + i);
    }
    CHECKF(wrong == 0, "%s: %zu allocated bytes lost", label, wrong);
    check_stats(label, &st, h.pages);
    heap_free(&h);
}

static void case_allocation(void)
{
    if (!need_sessions())
        return;
    allocate_in_session(BM_COMPACT_AUTO, 0, 0);
    allocate_in_session(BM_COMPACT_AUTO, 1, 0);
    allocate_in_session(BM_COMPACT_COPY, 1, 0);
    if (g_support == 1)
        allocate_in_session(BM_COMPACT_MOVE, 1, 0);
    allocate_in_session(BM_COMPACT_AUTO, 1, 1);
}

/* ---- the parent --------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Runs fn in a child; passes if the child exits 0 within the watchdog. */
static void run_case(const char *name, void (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        CHECKF(0, "case %s: fork: %s", name, strerror(errno));
        return;
    }
    if (pid == 0) {
        int before = check_failed_;
        check_note("case %s", name);
        fn();
        fflush(stdout);
        fflush(stderr);
        _exit(check_failed_ > before ? 1 : g_case_skipped ? 77 : 0);
    }
    double t0 = now_s();
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            CHECKF(0, "case %s: waitpid: %s", name, strerror(errno));
            return;
        }
        if (now_s() - t0 > WATCHDOG_S) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CHECKF(0, "case %s: FAIL: timed out after %d s (hung; killed)", name, WATCHDOG_S);
            check_note("case %s: FAIL (timed out)", name);
            return;
        }
        struct timespec step = {0, 5 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    double took = now_s() - t0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        CHECK(1);
        check_note("case %s: PASS (%.2f s)", name, took);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        check_note("case %s: SKIPPED", name);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        CHECKF(0, "case %s: FAIL: killed by signal %d (%s)", name, sig, strsignal(sig));
        check_note("case %s: FAIL (signal %d, %s)", name, sig, strsignal(sig));
    } else {
        CHECKF(0, "case %s: FAIL: exit status %d", name, WEXITSTATUS(status));
        check_note("case %s: FAIL", name);
    }
}

/* bm_compact_supported() asked in a child: the library remembers the
 * answer per process, and case 11 needs a process that never asked. */
static void probe_support(void)
{
    int fds[2];
    g_support = -ENOSYS;
    snprintf(g_support_why, sizeof g_support_why, "the probe failed");
    if (pipe(fds) != 0)
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int s = bm_compact_supported();
        char msg[sizeof g_support_why];
        memset(msg, 0, sizeof msg);
        snprintf(msg, sizeof msg, "%s", s < 0 ? bm_last_error() : "");
        ssize_t w1 = write(fds[1], &s, sizeof s);
        ssize_t w2 = write(fds[1], msg, sizeof msg);
        _exit(w1 == (ssize_t)sizeof s && w2 == (ssize_t)sizeof msg ? 0 : 1);
    }
    close(fds[1]);
    int s;
    if (pid > 0 && read(fds[0], &s, sizeof s) == (ssize_t)sizeof s) {
        g_support = s;
        ssize_t n = read(fds[0], g_support_why, sizeof g_support_why - 1);
        g_support_why[n > 0 ? n : 0] = 0;
    }
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

static long read_long(const char *path)
{
    char buf[64];
    return read_text(path, buf, sizeof buf) ? strtol(buf, NULL, 10) : -1;
}

static int write_long(const char *path, long v)
{
    char buf[64];
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int n = snprintf(buf, sizeof buf, "%ld\n", v);
    int ok = write(fd, buf, (size_t)n) == n;
    close(fd);
    return ok ? 0 : -1;
}

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

/* Reserves huge pages for case 8 if an 8 MiB hugetlb mapping fails now;
 * returns the old nr_hugepages to restore, or -1 if nothing changed. */
static long reserve_huge_pages(void)
{
    void *p = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p != MAP_FAILED) {
        munmap(p, 8 << 20);
        return -1;
    }
    long old = read_long(NR_HUGEPAGES);
    if (geteuid() != 0 || old < 0 || access(NR_HUGEPAGES, W_OK) != 0)
        return -1;
    if (write_long(NR_HUGEPAGES, old + 8) != 0)
        return -1;
    check_note("nr_hugepages raised from %ld to %ld for case 8", old, read_long(NR_HUGEPAGES));
    return old;
}

int main(void)
{
    probe_support();
    if (g_support < 0)
        check_note("concurrent compaction unsupported here (%d: %s): session cases are skipped",
                   g_support, g_support_why);
    else
        check_note("concurrent compaction supported (%s)", g_support == 1 ? "with moves" : "no moves");
    run_case("1 mlockall(MCL_CURRENT|MCL_FUTURE)", case_mlockall);
    run_case("2 SIGUSR1 handler reading the heap", case_signal_handler_reads_heap);
    run_case("3 asynchronous pthread_cancel", case_async_cancel);
    run_case("4 siglongjmp time-outs", case_siglongjmp_timeouts);
    run_case("5 heaps prepare must refuse", case_refusals);
    run_case("5b a heap of several mappings", case_several_mappings);
    run_case("6 overlapping sessions", case_overlapping_sessions);
    run_case("7 MAP_SHARED memfd heap", case_memfd);
    long huge_old = reserve_huge_pages();
    run_case("8 hugetlb heap", case_hugetlb);
    if (huge_old >= 0) {
        if (write_long(NR_HUGEPAGES, huge_old) == 0)
            check_note("nr_hugepages restored to %ld", huge_old);
        else
            check_note("nr_hugepages could not be restored to %ld: %s", huge_old, strerror(errno));
    }
    run_case("9 mlock()ed heap", case_mlock);
    run_case("10 heap made read-only during the session", case_read_only_during_session);
    run_case("11 seccomp refusing userfaultfd", case_seccomp);
    run_case("11b seccomp installed after a positive answer", case_seccomp_after_asking);
    run_case("12 RLIMIT_AS", case_rlimit_as);
    run_case("13 80 threads faulting at once", case_many_threads);
    run_case("14 16 threads racing on one object, 50 sessions", case_one_page_race);
    run_case("15 several spaces in one pause", case_spaces);
    run_case("16 allocation during a session", case_allocation);
    return check_finish();
}
