/* test_harden.c - arguments and situations that used to abort, hang or
 * leak: absurd sizes and thread counts, threads that cannot start, a
 * callback that longjmps out, strategy names with stray case or spaces
 * (a caught panic, which no C program can cause, is a unit test of
 * src/status.rs).
 *
 * Anything that could crash or hang runs in a forked child (with an alarm),
 * which reports through its exit status: 0 is success, k > 0 names the
 * first step that failed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bulkmem.h"
#include "check.h"

#define MIB ((size_t)1 << 20)

/* Exit status of a child that skips: not a failure. */
#define SKIP 77

/* Runs fn in a child with an alarm of `secs`; returns its exit code, or
 * 100 + signal if it died. */
static int in_child(int (*fn)(void), unsigned secs)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 99;
    }
    if (pid == 0) {
        alarm(secs);
        _exit(fn());
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st))
        return 100 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static int child_ok(const char *what, int code)
{
    if (code == SKIP) {
        check_note("%s: skipped (see above)", what);
        return 1;
    }
    CHECKF(code == 0, "%s: child step %d failed (>100: died of signal %d)", what, code,
           code > 100 ? code - 100 : 0);
    return code == 0;
}

/* ---- 7: sizes that aborted ---------------------------------------------- */

static int migrate_huge(void)
{
    int rc = bm_migrate((void *)4096, SIZE_MAX - 8191, 0, NULL);
    if (rc != -EINVAL && rc != -ENOMEM)
        return 1;
    rc = bm_migrate((void *)4096, (size_t)1 << 48, 0, NULL);
    if (rc != -EINVAL && rc != -ENOMEM)
        return 2;
    return 0;
}

static int engine_threads_huge(void)
{
    size_t counts[] = {(size_t)1 << 40, SIZE_MAX, SIZE_MAX / 2 + 1};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        bm_engine_opts o = {0};
        o.threads = counts[i];
        errno = 0;
        bm_engine *e = bm_engine_new(&o);
        if (e != NULL || errno != EINVAL) {
            fprintf(stderr, "threads %zu: %p errno %d (%s)\n", counts[i], (void *)e, errno,
                    bm_last_error());
            return 1 + (int)i;
        }
        if (!strstr(bm_last_error(), "out of range"))
            return 10 + (int)i;
    }
    errno = 0;
    bm_engine *e = bm_engine_new_offload(NULL, BM_OFFLOAD_EMULATED, 0, (size_t)1 << 40);
    if (e != NULL || errno != EINVAL) {
        fprintf(stderr, "channels 2^40: %p errno %d (%s)\n", (void *)e, errno, bm_last_error());
        return 20;
    }
    return 0;
}

static void test_sizes(void)
{
    child_ok("bm_migrate with absurd lengths", in_child(migrate_huge, 30));
    child_ok("engines with absurd thread/channel counts", in_child(engine_threads_huge, 30));
}

/* ---- 8: threads that cannot start --------------------------------------- */

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

static int limit_threads(rlim_t n)
{
    /* The soft limit only: it is the one enforced, and it can be raised
     * again later up to the hard one. */
    struct rlimit r;
    if (getrlimit(RLIMIT_NPROC, &r) != 0)
        return -1;
    r.rlim_cur = n;
    return setrlimit(RLIMIT_NPROC, &r);
}

static int nproc_limited(void)
{
    /* RLIMIT_NPROC does not bind root (CAP_SYS_RESOURCE): become a user id
     * that owns no processes, so the count is this child's threads. */
    if (geteuid() == 0 && (setgid(61234) != 0 || setuid(61234) != 0)) {
        printf("note: cannot drop to an unprivileged uid: RLIMIT_NPROC not tested\n");
        return SKIP;
    }
    if (geteuid() == 0) {
        printf("note: still root: RLIMIT_NPROC not tested\n");
        return SKIP;
    }
    /* As root we own nothing else now: room for this thread and 2 more.
     * Otherwise the user's other processes count too: allow none. */
    int fresh = getuid() == 61234;
    if (limit_threads(fresh ? 3 : 1) != 0)
        return 1;
    bm_engine_opts o = {0};
    o.threads = 8;
    errno = 0;
    bm_engine *e = bm_engine_new(&o);
    if (e != NULL || errno != EAGAIN) {
        fprintf(stderr, "engine with 8 threads under RLIMIT_NPROC: %p errno %d (%s)\n",
                (void *)e, errno, bm_last_error());
        return 2;
    }
    /* Every worker that did start was stopped and joined. */
    for (int i = 0; i < 200 && threads_now() != 1; i++)
        usleep(10000);
    if (threads_now() != 1) {
        fprintf(stderr, "%d threads left after the failed start\n", threads_now());
        return 3;
    }
    if (!fresh)
        return 0;

    /* Offload: one CPU worker starts, then no channel thread can. */
    if (limit_threads(8) != 0)
        return 4;
    o.threads = 1;
    e = bm_engine_new_offload(&o, BM_OFFLOAD_EMULATED, 0, 2);
    if (!e) {
        fprintf(stderr, "offload engine: %s\n", bm_last_error());
        return 5;
    }
    size_t n = 16 * MIB;
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst)
        return 6;
    memset(src, 0x5a, n);
    memset(dst, 0, n);
    if (bm_engine_register(e, src, n) != 0 || bm_engine_register(e, dst, n) != 0)
        return 7;
    if (limit_threads((rlim_t)threads_now() - 1) != 0)
        return 8;
    bm_extent x = {dst, src, n};
    int rc = bm_engine_copy_batch(e, &x, 1);
    if (rc != 0) {
        fprintf(stderr, "offload batch without channel threads: %d (%s)\n", rc, bm_last_error());
        return 9;
    }
    for (size_t i = 0; i < n; i++)
        if (dst[i] != 0x5a)
            return 10;
    bm_engine_free(e);
    free(src);
    free(dst);
    return 0;
}

static void test_threads_that_cannot_start(void)
{
    child_ok("bm_engine_new under RLIMIT_NPROC", in_child(nproc_limited, 60));
}

/* ---- 9: a progress callback that longjmps out ---------------------------- */

static jmp_buf g_escape;
static int g_jumps;

static void jump_out(size_t done, size_t total, void *ctx)
{
    (void)done, (void)total, (void)ctx;
    g_jumps++;
    longjmp(g_escape, 1);
}

struct submit {
    bm_engine *e;
    bm_extent x;
    int rc;
};

static void *submit_thread(void *p)
{
    struct submit *s = p;
    s->rc = bm_engine_copy_batch(s->e, &s->x, 1);
    return NULL;
}

static int escape_once(bm_engine *e, bm_extent *x)
{
    bm_ctl ctl = {jump_out, NULL, NULL};
    if (setjmp(g_escape) == 0) {
        bm_engine_copy_batch_ctl(e, x, 1, &ctl, NULL);
        return 0; /* the callback did not run */
    }
    return 1;
}

static int longjmp_out(void)
{
    bm_engine_opts o = {0};
    o.threads = 2;
    bm_engine *e = bm_engine_new(&o);
    if (!e)
        return 1;
    size_t n = 1 * MIB; /* under 4 MiB: runs on this thread */
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst)
        return 2;
    memset(src, 0x77, n);
    bm_extent x = {dst, src, n};

    /* Abandoned, then the same thread again: proceeds. */
    if (!escape_once(e, &x))
        return 3;
    int rc = bm_engine_copy_batch(e, &x, 1);
    if (rc != 0) {
        fprintf(stderr, "same thread after longjmp: %d (%s)\n", rc, bm_last_error());
        return 4;
    }
    /* ... and the engine is free for everyone afterwards. */
    struct submit s = {e, x, 1};
    pthread_t t;
    if (pthread_create(&t, NULL, submit_thread, &s) != 0)
        return 5;
    pthread_join(t, NULL);
    if (s.rc != 0) {
        fprintf(stderr, "other thread after recovery: %d\n", s.rc);
        return 6;
    }

    /* Abandoned again: another thread gives up with EBUSY, not forever. */
    if (!escape_once(e, &x))
        return 7;
    s.rc = 1;
    if (pthread_create(&t, NULL, submit_thread, &s) != 0)
        return 8;
    pthread_join(t, NULL); /* the alarm catches a hang */
    if (s.rc != -EBUSY) {
        fprintf(stderr, "other thread while abandoned: %d\n", s.rc);
        return 9;
    }
    if (bm_engine_copy_batch(e, &x, 1) != 0)
        return 10;
    for (size_t i = 0; i < n; i++)
        if (dst[i] != 0x77)
            return 11;
    if (g_jumps != 2)
        return 12;
    bm_engine_free(e);
    free(src);
    free(dst);
    return 0;
}

static void test_longjmp_out_of_progress(void)
{
    child_ok("longjmp out of a progress callback", in_child(longjmp_out, 20));
}

/* ---- 16: names ----------------------------------------------------------- */

static void test_strategy_names_are_read_as_everywhere_else(void)
{
    unsigned char a[64] = {1}, b[64] = {0};
    CHECK_EQ_INT(bm_copy_with("auto", b, a, sizeof a), 0);
    CHECK_EQ_INT(bm_copy_with("per-page", b, a, sizeof a), 0);
    /* The command line and BULKMEM_STRATEGY take these: so does C. */
    const char *good[] = {"AUTO", "Auto", "auto ", " auto", "auto\n", "per_page", "PER-PAGE"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECKF(bm_copy_with(good[i], b, a, sizeof a) == 0, "bm_copy_with(\"%s\")", good[i]);
        CHECKF(bm_clear_with(good[i], b, sizeof b) == 0, "bm_clear_with(\"%s\")", good[i]);
        CHECKF(bm_strategy_available(good[i]) == 1, "bm_strategy_available(\"%s\")", good[i]);
    }
    /* Upper case reaches the strategy it names, not `auto`: a strategy this
       CPU cannot run is -ENOTSUP under either spelling. */
    for (size_t i = 0; bm_strategy_name(i); i++) {
        char upper[32];
        const char *name = bm_strategy_name(i);
        size_t n = strlen(name);
        CHECK(n < sizeof upper);
        for (size_t j = 0; j <= n; j++)
            upper[j] = (char)toupper((unsigned char)name[j]);
        CHECKF(bm_strategy_available(upper) == bm_strategy_available(name), "%s", upper);
        CHECKF(bm_strategy_supports(upper, BM_OP_COPY) == bm_strategy_supports(name, BM_OP_COPY),
               "%s", upper);
    }
    const char *bad[] = {"", "avx3", "per page", "auto-", "avx2nt"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(bm_copy_with(bad[i], b, a, sizeof a) == -EINVAL, "bm_copy_with(\"%s\")", bad[i]);
        CHECKF(bm_clear_with(bad[i], b, sizeof b) == -EINVAL, "bm_clear_with(\"%s\")", bad[i]);
        CHECKF(bm_strategy_available(bad[i]) == -EINVAL, "bm_strategy_available(\"%s\")",
               bad[i]);
    }
    CHECK(strstr(bm_last_error(), "unknown strategy 'avx2nt'") != NULL);
    /* Every name the library prints is accepted as printed. */
    for (size_t i = 0; bm_strategy_name(i); i++)
        CHECKF(bm_strategy_supports(bm_strategy_name(i), BM_OP_COPY) >= 0, "%s",
               bm_strategy_name(i));
}

int main(void)
{
    test_sizes();
    test_threads_that_cannot_start();
    test_longjmp_out_of_progress();
    test_strategy_names_are_read_as_everywhere_else();
    return check_finish();
}
