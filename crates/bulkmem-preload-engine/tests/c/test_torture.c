/* test_torture.c - libbulkmem_preload.so under concurrency, fork and
 * signals:
 *
 *   (a) 8 threads copy, move (overlapping too) and clear random sizes
 *       (1 B .. 8 MiB, mostly small) on private buffers for ~0.5 s each,
 *       checking every result;
 *   (b) fork after a 64 MiB copy (a multi-threaded engine may exist), and
 *       fork from a thread while three others run large copies; each child
 *       does a 64 MiB memset + memcpy + memset and checks them;
 *   (c) a 1 ms interval timer whose SIGUSR1 handler copies 256 B and 1 MiB
 *       and clears 4 KiB (static buffers), while the main thread runs large
 *       copies and moves for ~0.5 s;
 *   (d) 10 million memcpy calls of 16..256 bytes.
 *
 * Run it under the preload (BULKMEM_PRELOAD_MIN=0 sends every call through
 * the accelerated path; a low BULKMEM_PRELOAD_MT_MIN brings in the
 * multi-threaded engine) or, with BULKMEM_TEST_EXPECT_NO_PRELOAD set,
 * against plain glibc. alarm(60) is the watchdog: a hang dies of SIGALRM.
 *
 * The copies go through volatile function pointers, so each is a real call
 * of the bound symbol. The checks are plain loops that compute the expected
 * bytes (they cannot be turned into memcpy/memset calls). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "preload_check.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

typedef unsigned char uchar;

static void *(*volatile p_memcpy)(void *, const void *, size_t) = memcpy;
static void *(*volatile p_memmove)(void *, const void *, size_t) = memmove;
static void *(*volatile p_memset)(void *, int, size_t) = memset;

/* --- helpers ------------------------------------------------------------------ */

/* Unaligned, alias-anything 8-byte access, so the checks go a word at a
 * time without memcpy calls. */
typedef uint64_t u64u __attribute__((may_alias, aligned(1)));

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define WORDWISE 1
#else
#define WORDWISE 0
#endif

/* Word k of pattern `seed`. */
static inline uint64_t pat_word(uint32_t seed, uint64_t k)
{
    uint64_t x = k * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0xD6E8FEB86659FD93ull + 1);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return x;
}

/* Byte i of pattern `seed` (byte i % 8 of word i / 8, little-endian):
 * position dependent, so shifted data shows up. */
static inline uchar pat(uint32_t seed, size_t i)
{
    return (uchar)(pat_word(seed, (uint64_t)i >> 3) >> ((i & 7) * 8));
}

static void fill_pat(uchar *p, size_t n, uint32_t seed, size_t base)
{
    size_t i = 0;
    if (WORDWISE) {
        for (; i < n && ((base + i) & 7) != 0; i++)
            p[i] = pat(seed, base + i);
        for (; i + 8 <= n; i += 8)
            *(u64u *)(p + i) = pat_word(seed, (base + i) >> 3);
    }
    for (; i < n; i++)
        p[i] = pat(seed, base + i);
}

/* First index that is not pattern `seed` from base, or n. */
static size_t find_not_pat(const uchar *p, size_t n, uint32_t seed, size_t base)
{
    size_t i = 0;
    if (WORDWISE) {
        for (; i < n && ((base + i) & 7) != 0; i++)
            if (p[i] != pat(seed, base + i))
                return i;
        for (; i + 8 <= n; i += 8)
            if (*(const u64u *)(p + i) != pat_word(seed, (base + i) >> 3))
                break; /* the byte loop below finds the byte */
    }
    for (; i < n; i++)
        if (p[i] != pat(seed, base + i))
            return i;
    return n;
}

/* First index whose byte is not v, or n. */
static size_t find_not(const uchar *p, uchar v, size_t n)
{
    uint64_t vv = (uint64_t)v * 0x0101010101010101ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (*(const u64u *)(p + i) != vv)
            break;
    for (; i < n; i++)
        if (p[i] != v)
            return i;
    return n;
}

/* First index where a and c differ, or n. */
static size_t find_diff(const uchar *a, const uchar *c, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        if (*(const u64u *)(a + i) != *(const u64u *)(c + i))
            break;
    for (; i < n; i++)
        if (a[i] != c[i])
            return i;
    return n;
}

static inline uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}


static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Async-signal-safe message on stderr. */
static void say(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    if (write(2, s, n) < 0) {
    }
}


/* --- the random copy/move/clear worker ------------------------------------------ */

struct worker {
    /* set up by the caller */
    int id;
    int large_only;       /* sizes from 1 MiB only */
    double seconds;       /* run this long ... */
    volatile int *stop;   /* ... or until *stop (may be NULL) */
    size_t max_len;       /* src holds max_len, dst 2 * max_len (+ slack) */
    uchar *src, *dst;
    size_t src_sz, dst_sz;
    uint32_t seed;        /* src holds pattern `seed` */
    /* results */
    unsigned long iters, n_copy, n_move, n_move_overlap, n_set, n_large, mismatches;
    unsigned long long bytes;
    size_t longest;
};

static void worker_init(struct worker *w, int id, size_t max_len, int large_only, double seconds,
                        volatile int *stop)
{
    memset(w, 0, sizeof *w);
    w->id = id;
    w->large_only = large_only;
    w->seconds = seconds;
    w->stop = stop;
    w->max_len = max_len;
    w->src_sz = max_len + 4096;
    w->dst_sz = 2 * max_len + 4096;
    w->src = alloc_buf(w->src_sz);
    w->dst = alloc_buf(w->dst_sz);
    w->seed = 0x1000u + (uint32_t)id;
    fill_pat(w->src, w->src_sz, w->seed, 0);
    fill_pat(w->dst, w->dst_sz, w->seed ^ 0xABCDu, 0);
}

static void worker_free(struct worker *w)
{
    free(w->src);
    free(w->dst);
}

static size_t pick_len(struct worker *w, uint64_t *rng, int force_large)
{
    uint64_t r = xs(rng);
    unsigned cls = (unsigned)(r % 100);
    if (w->large_only || force_large || cls >= 96) {
        unsigned lo = w->large_only ? 20 : 16, hi = 0;
        while (((size_t)2 << hi) <= w->max_len)
            hi++;
        /* 2^lo .. max_len, about log-uniform */
        unsigned sh = lo + (unsigned)((r >> 8) % (hi - lo + 1));
        size_t n = ((size_t)1 << sh) + (size_t)((r >> 20) % ((size_t)1 << sh));
        return n > w->max_len ? w->max_len : n;
    }
    if (cls < 80)
        return 1 + (size_t)((r >> 8) % 256);
    return 257 + (size_t)((r >> 8) % (64 * KIB - 257));
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(w->id + 1) + 12345;
    double t0 = now_s();
    unsigned long it;

    for (it = 0;; it++) {
        if (it >= 4 && (now_s() - t0 >= w->seconds || (w->stop && *w->stop)))
            break;
        /* the first four: one of each operation at a large size */
        int op = it < 4 ? (int)it : (int)(xs(&rng) % 4);
        size_t n = pick_len(w, &rng, it < 4);
        uchar *d = w->dst;
        int bad = 0;

        if (n >= 64 * KIB)
            w->n_large++;
        if (n > w->longest)
            w->longest = n;
        w->bytes += n;

        if (op == 0 || op == 3) {
            /* memcpy, or memmove between distinct buffers */
            size_t so = (size_t)(xs(&rng) % (w->src_sz - n + 1));
            size_t off = 1 + (size_t)(xs(&rng) % (w->dst_sz - n - 1));
            uchar g0 = d[off - 1], g1 = d[off + n];
            d[off] = (uchar)~pat(w->seed, so);
            d[off + n - 1] = (uchar)~pat(w->seed, so + n - 1);
            d[off + n / 2] = (uchar)~pat(w->seed, so + n / 2);
            void *ret = op == 0 ? p_memcpy(d + off, w->src + so, n)
                                : p_memmove(d + off, w->src + so, n);
            bad = ret != d + off || d[off - 1] != g0 || d[off + n] != g1 ||
                  find_diff(d + off, w->src + so, n) != n;
            if (op == 0)
                w->n_copy++;
            else
                w->n_move++;
        } else if (op == 1) {
            /* overlapping memmove inside dst */
            uint64_t r = xs(&rng);
            long s;
            switch (r % 6) {
            case 0: s = 1; break;
            case 1: s = -1; break;
            case 2: s = n > 4097 ? 4097 : (long)(n / 2); break;
            case 3: s = -(long)(n / 2); break;
            default: s = (long)((r >> 8) % (2 * n + 1)) - (long)n; break;
            }
            size_t as = (size_t)(s < 0 ? -s : s), span = n + as;
            size_t lo = 1 + (size_t)(xs(&rng) % (w->dst_sz - span - 1));
            size_t so = s < 0 ? lo + as : lo, doff = so + (size_t)s;
            uint32_t sd = w->seed ^ (uint32_t)(it * 2654435761u);
            fill_pat(d + lo - 1, span + 2, sd, lo - 1);
            void *ret = p_memmove(d + doff, d + so, n);
            bad = ret != d + doff ||
                  find_not_pat(d + lo - 1, doff - (lo - 1), sd, lo - 1) != doff - (lo - 1) ||
                  find_not_pat(d + doff, n, sd, so) != n ||
                  find_not_pat(d + doff + n, lo + span + 1 - (doff + n), sd, doff + n) !=
                      lo + span + 1 - (doff + n);
            w->n_move_overlap++;
        } else {
            /* memset */
            uchar v = (uchar)(xs(&rng) >> 24);
            size_t off = 1 + (size_t)(xs(&rng) % (w->dst_sz - n - 1));
            uchar g0 = d[off - 1], g1 = d[off + n];
            d[off] = (uchar)~v;
            d[off + n - 1] = (uchar)~v;
            d[off + n / 2] = (uchar)~v;
            void *ret = p_memset(d + off, v, n);
            bad = ret != d + off || d[off - 1] != g0 || d[off + n] != g1 ||
                  find_not(d + off, v, n) != n;
            w->n_set++;
        }
        if (bad) {
            if (w->mismatches < 5)
                fprintf(stderr, "thread %d: iteration %lu op %d n=%zu gave a wrong result\n",
                        w->id, it, op, n);
            w->mismatches++;
        }
    }
    w->iters = it;
    /* the copies compared with src: src must still be the pattern */
    if (find_not_pat(w->src, w->src_sz, w->seed, 0) != w->src_sz) {
        fprintf(stderr, "thread %d: source buffer was written\n", w->id);
        w->mismatches++;
    }
    return NULL;
}

/* --- (a) threads ------------------------------------------------------------------ */

#define N_THREADS 8

static void test_threads(void)
{
    struct worker w[N_THREADS];
    pthread_t th[N_THREADS];
    double t0 = now_s();
    unsigned long iters = 0, large = 0, ov = 0;
    unsigned long long bytes = 0;
    int started = 0;

    for (int i = 0; i < N_THREADS; i++)
        worker_init(&w[i], i, 8 * MIB, 0, 0.5, NULL);
    for (int i = 0; i < N_THREADS; i++) {
        int rc = pthread_create(&th[i], NULL, worker_main, &w[i]);
        CHECKF(rc == 0, "pthread_create: %d", rc);
        if (rc == 0)
            started++;
        else
            break;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        CHECKF(w[i].mismatches == 0, "thread %d: %lu of %lu operations wrong", i,
               w[i].mismatches, w[i].iters);
        CHECKF(w[i].iters >= 4, "thread %d ran %lu operations", i, w[i].iters);
        iters += w[i].iters;
        large += w[i].n_large;
        ov += w[i].n_move_overlap;
        bytes += w[i].bytes;
        worker_free(&w[i]);
    }
    check_note("note: (a) %d threads: %lu operations (%lu of 64 KiB .. 8 MiB, %lu overlapping "
               "memmoves), %.1f GiB, all checked (%.2f s)",
               started, iters, large, ov, (double)bytes / (double)(1u << 30), now_s() - t0);
}

/* --- (b) fork ------------------------------------------------------------------------ */

#define FORK_LEN (64 * MIB)
#define FORK_SEED 0x77u

static uchar *fork_src, *fork_dst;

/* In a child: memset, memcpy and memset of FORK_LEN bytes, each checked.
 * Returns the exit status. */
static int child_work(void)
{
    alarm(20); /* a hang becomes death by SIGALRM */
    p_memset(fork_dst, 0xC3, FORK_LEN);
    if (find_not(fork_dst, 0xC3, FORK_LEN) != FORK_LEN) {
        say("child: 64 MiB memset (0xC3) wrong\n");
        return 1;
    }
    p_memcpy(fork_dst, fork_src, FORK_LEN);
    if (find_not_pat(fork_dst, FORK_LEN, FORK_SEED, 0) != FORK_LEN) {
        say("child: 64 MiB memcpy wrong\n");
        return 1;
    }
    p_memset(fork_dst, 0x3C, FORK_LEN);
    if (find_not(fork_dst, 0x3C, FORK_LEN) != FORK_LEN) {
        say("child: 64 MiB memset (0x3C) wrong\n");
        return 1;
    }
    return 0;
}

/* Forks, runs child_work in the child, waits. Returns the wait status, or
 * -1 if fork failed. */
static int fork_and_wait(void)
{
    pid_t pid = fork();
    int st = 0;
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(child_work());
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return st;
}

static void check_child(int st, const char *what)
{
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child %s %d", what,
           st == -1                ? "could not be forked or waited for, status"
           : WIFSIGNALED(st)       ? "killed by signal (14 = SIGALRM: hung)"
                                   : "exited with status",
           st == -1 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

#define N_COPIERS 3
#define N_FORKS 3

struct forker {
    int status[N_FORKS];
};

static void *forker_main(void *arg)
{
    struct forker *f = arg;
    for (int i = 0; i < N_FORKS; i++) {
        sleep_ms(3 + 7 * i); /* land at different points of the copiers' work */
        f->status[i] = fork_and_wait();
    }
    return NULL;
}

static void test_fork(void)
{
    double t0 = now_s();
    int st;

    fork_src = alloc_buf(FORK_LEN);
    fork_dst = alloc_buf(FORK_LEN);
    fill_pat(fork_src, FORK_LEN, FORK_SEED, 0);
    fill_pat(fork_dst, FORK_LEN, FORK_SEED ^ 1u, 0);

    /* a big copy first, so a multi-threaded engine may be running */
    CHECK(p_memcpy(fork_dst, fork_src, FORK_LEN) == fork_dst);
    CHECKF(find_not_pat(fork_dst, FORK_LEN, FORK_SEED, 0) == FORK_LEN,
           "parent: 64 MiB memcpy before fork wrong");
    fflush(stdout);
    fflush(stderr);
    st = fork_and_wait();
    check_child(st, "fork after a 64 MiB memcpy");
    /* the parent still works */
    p_memset(fork_dst, 0x11, FORK_LEN);
    CHECKF(find_not(fork_dst, 0x11, FORK_LEN) == FORK_LEN, "parent: memset after fork wrong");
    check_note("note: (b) fork after a 64 MiB memcpy: child's 64 MiB memset/memcpy/memset ok "
               "unless reported (%.2f s)", now_s() - t0);

    /* fork from a thread while other threads copy 1 .. 32 MiB */
    {
        struct worker w[N_COPIERS];
        pthread_t th[N_COPIERS], fth;
        struct forker f;
        volatile int stop = 0;
        int started = 0, frc;
        unsigned long iters = 0;

        t0 = now_s();
        for (int i = 0; i < N_COPIERS; i++)
            worker_init(&w[i], 100 + i, 32 * MIB, 1, 30.0, &stop);
        for (int i = 0; i < N_COPIERS; i++) {
            int rc = pthread_create(&th[i], NULL, worker_main, &w[i]);
            CHECKF(rc == 0, "pthread_create: %d", rc);
            if (rc != 0)
                break;
            started++;
        }
        sleep_ms(20);
        for (int i = 0; i < N_FORKS; i++)
            f.status[i] = -1;
        fflush(stdout);
        fflush(stderr);
        frc = pthread_create(&fth, NULL, forker_main, &f);
        CHECKF(frc == 0, "pthread_create: %d", frc);
        if (frc == 0)
            pthread_join(fth, NULL);
        stop = 1;
        for (int i = 0; i < started; i++) {
            pthread_join(th[i], NULL);
            CHECKF(w[i].mismatches == 0, "copier %d: %lu of %lu operations wrong", i,
                   w[i].mismatches, w[i].iters);
            iters += w[i].iters;
            worker_free(&w[i]);
        }
        for (int i = 0; i < N_FORKS; i++)
            check_child(f.status[i], "fork from a thread while others copy");
        check_note("note: (b) %d forks from a thread while %d threads ran %lu copies of "
                   "1..32 MiB (%.2f s)",
                   N_FORKS, started, iters, now_s() - t0);
    }
    free(fork_src);
    free(fork_dst);
}

/* --- (c) signal handler ---------------------------------------------------------------- */

#define H_SMALL 256
#define H_BIG MIB
#define H_SET (4 * KIB)
#define H_SEED_S 0x51u
#define H_SEED_B 0x52u

static uchar h_src_small[H_SMALL + 64], h_dst_small[H_SMALL];
static uchar h_src_big[H_BIG + 4096], h_dst_big[H_BIG];
static uchar h_set[H_SET];
static volatile sig_atomic_t h_calls = 0, h_errors = 0;
/* Past this time the handler disarms the timer itself, so a handler slower
 * than the interval cannot starve the main thread for ever. */
static timer_t h_timer;
static double h_deadline;
static volatile sig_atomic_t h_expired = 0;

static size_t h_small_off(unsigned k) { return k % 64; }
static size_t h_big_off(unsigned k) { return (size_t)(k * 61u) % 4096; }
static uchar h_val(unsigned k) { return (uchar)(k * 37u + 1u); }

static void on_usr1(int sig)
{
    int saved = errno;
    unsigned k = (unsigned)h_calls;
    size_t so = h_small_off(k), bo = h_big_off(k);
    uchar v = h_val(k);
    int bad = 0;

    (void)sig;
    bad |= p_memcpy(h_dst_small, h_src_small + so, H_SMALL) != h_dst_small;
    bad |= p_memcpy(h_dst_big, h_src_big + bo, H_BIG) != h_dst_big;
    bad |= p_memset(h_set, v, H_SET) != h_set;
    bad |= find_diff(h_dst_small, h_src_small + so, H_SMALL) != H_SMALL;
    bad |= find_diff(h_dst_big, h_src_big + bo, H_BIG) != H_BIG;
    bad |= find_not(h_set, v, H_SET) != H_SET;
    if (bad)
        h_errors = h_errors + 1;
    h_calls = (sig_atomic_t)(k + 1);
    if (now_s() > h_deadline) {
        struct itimerspec off;
        off.it_value.tv_sec = off.it_value.tv_nsec = 0;
        off.it_interval = off.it_value;
        timer_settime(h_timer, 0, &off, NULL);
        h_expired = 1;
    }
    errno = saved;
}

static void test_signals(void)
{
    struct sigaction sa;
    struct sigevent sev;
    struct itimerspec its;
    sigset_t set;
    struct worker w;
    double t0 = now_s();
    int rc;

    fill_pat(h_src_small, sizeof h_src_small, H_SEED_S, 0);
    fill_pat(h_src_big, sizeof h_src_big, H_SEED_B, 0);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    rc = sigaction(SIGUSR1, &sa, NULL);
    CHECK_EQ_INT(rc, 0);

    memset(&sev, 0, sizeof sev);
    sev.sigev_signo = SIGUSR1;
#if defined(SIGEV_THREAD_ID) && defined(__GLIBC__)
    /* at this thread, not at whichever thread (an engine's worker?) the
     * kernel picks */
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
#else
    sev.sigev_notify = SIGEV_SIGNAL;
#endif
    rc = timer_create(CLOCK_MONOTONIC, &sev, &h_timer);
    CHECKF(rc == 0, "timer_create: errno %d", errno);
    if (rc != 0)
        return;

    worker_init(&w, 200, 16 * MIB, 1, 0.5, NULL);
    h_deadline = now_s() + 3.0;
    its.it_value.tv_sec = 0;
    its.it_value.tv_nsec = 1000000;
    its.it_interval = its.it_value;
    rc = timer_settime(h_timer, 0, &its, NULL);
    CHECK_EQ_INT(rc, 0);

    worker_main(&w);

    /* stop: block first, so the handler cannot run while we look */
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    timer_delete(h_timer);

    {
        unsigned calls = (unsigned)h_calls, k = calls - 1;
        CHECKF(calls >= 10, "the 1 ms timer's handler ran only %u times in %.2f s", calls,
               now_s() - t0);
        CHECKF(h_errors == 0, "%d of %u handler runs saw wrong results", (int)h_errors, calls);
        if (calls > 0) {
            CHECK(find_not_pat(h_dst_small, H_SMALL, H_SEED_S, h_small_off(k)) == H_SMALL);
            CHECK(find_not_pat(h_dst_big, H_BIG, H_SEED_B, h_big_off(k)) == H_BIG);
            CHECK(find_not(h_set, h_val(k), H_SET) == H_SET);
        }
        CHECK(find_not_pat(h_src_small, sizeof h_src_small, H_SEED_S, 0) == sizeof h_src_small);
        CHECK(find_not_pat(h_src_big, sizeof h_src_big, H_SEED_B, 0) == sizeof h_src_big);
        CHECKF(w.mismatches == 0, "main thread under signals: %lu of %lu operations wrong",
               w.mismatches, w.iters);
        check_note("note: (c) SIGUSR1 every 1 ms, handler memcpy 256 B + 1 MiB and memset "
                   "4 KiB: %u runs, %d wrong; main thread meanwhile %lu copies/moves/clears "
                   "of 1..16 MiB (%.2f s)%s",
                   calls, (int)h_errors, w.iters, now_s() - t0,
                   h_expired ? "; the handler hit its 3 s deadline and stopped the timer "
                               "(slower than the 1 ms interval?)"
                             : "");
    }
    worker_free(&w);
}

/* --- (d) many small copies --------------------------------------------------------------- */

#define SMALL_CALLS 10000000UL
#define SLOTS 256
#define SLOT_SZ 512
#define SM_SEED 0x61u

static void test_small(void)
{
    static uchar src[8192 + 256];
    static uchar dst[SLOTS * SLOT_SZ];
    static struct { unsigned short so, doff, len; } last[SLOTS];
    uint64_t rng = 0xDEADBEEFCAFEull;
    unsigned long bad = 0, bad_final = 0;
    double t0 = now_s();

    fill_pat(src, sizeof src, SM_SEED, 0);
    fill_pat(dst, sizeof dst, SM_SEED ^ 7u, 0);
    for (size_t s = 0; s < SLOTS; s++)
        last[s].len = 0;

    for (unsigned long i = 0; i < SMALL_CALLS; i++) {
        uint64_t r = xs(&rng);
        size_t slot = i % SLOTS;
        size_t len = 16 + (size_t)(r % 241);                /* 16..256 */
        size_t so = (size_t)((r >> 8) % 8192);
        size_t doff = (size_t)((r >> 24) % (SLOT_SZ - len + 1));
        uchar *d = dst + slot * SLOT_SZ + doff;
        uchar e0 = pat(SM_SEED, so), e1 = pat(SM_SEED, so + len - 1);
        d[0] = (uchar)~e0;
        d[len - 1] = (uchar)~e1;
        p_memcpy(d, src + so, len);
        bad += (d[0] != e0) | (d[len - 1] != e1);
        last[slot].so = (unsigned short)so;
        last[slot].doff = (unsigned short)doff;
        last[slot].len = (unsigned short)len;
    }
    for (size_t s = 0; s < SLOTS; s++) {
        size_t len = last[s].len;
        if (find_not_pat(dst + s * SLOT_SZ + last[s].doff, len, SM_SEED, last[s].so) != len)
            bad_final++;
    }
    CHECKF(bad == 0, "%lu of %lu small memcpy calls had a wrong first or last byte", bad,
           SMALL_CALLS);
    CHECKF(bad_final == 0, "%lu of the last %d small copies are wrong", bad_final, SLOTS);
    CHECK(find_not_pat(src, sizeof src, SM_SEED, 0) == sizeof src);
    check_note("note: (d) %lu memcpy of 16..256 bytes, ends of each and the last %d in full "
               "checked (%.2f s)",
               SMALL_CALLS, SLOTS, now_s() - t0);
}

int main(void)
{
    double t0 = now_s();

    alarm(60); /* watchdog: default action kills a hung run */
    check_preload_presence();
    test_threads();
    test_fork();
    test_signals();
    test_small();
    check_note("note: total %.2f s", now_s() - t0);
    return check_finish();
}
