/* The preload's thread policy and its edges, one scenario per run (the
 * first argument), each in a process of its own so that the engine starts
 * (or not) afresh:
 *
 *   handler   large copies inside signal handlers (sigaction with and
 *             without SA_SIGINFO, signal()) start no thread; the handlers
 *             see their siginfo and are reported back as installed; a
 *             large copy outside them has helper threads, which are gone
 *             when it returns
 *   alarm     SIGALRM handlers copying while the main thread is inside
 *             malloc: no thread started there, the heap intact
 *   seccomp   large copies with helpers, then seccomp strict mode, then a
 *             large copy: the process must still copy, write and exit
 *   seccomp-cold  strict mode before any large call (bulkmem not yet
 *             initialised), then a large copy and clear
 *   unshare   large copies with helpers, then unshare(CLONE_NEWUSER)
 *   zero      zero-length calls with null pointers return the destination
 *   fdstats   BULKMEM_PRELOAD_STATS=1 in a program that closes every
 *             descriptor above 2 and opens a data file (argv[2])
 *   unwind    the preload's own unwinder (linked in statically, no
 *             libgcc_s) catches an unwind through the library's frames
 *
 * Prints "ok" on success (the runner also looks at the exit status). */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "bulkmem_preload_state.h"

/* The fortified entry points; glibc defines them, no header declares them. */
extern void *__memcpy_chk(void *, const void *, size_t, size_t);
extern void *__memmove_chk(void *, const void *, size_t, size_t);
extern void *__memset_chk(void *, int, size_t, size_t);

static void *(*volatile p_memcpy)(void *, const void *, size_t) = memcpy;
static void *(*volatile p_memmove)(void *, const void *, size_t) = memmove;
static void *(*volatile p_memset)(void *, int, size_t) = memset;
static void *(*volatile p_mempcpy)(void *, const void *, size_t) = mempcpy;
static void *(*volatile p_memcpy_chk)(void *, const void *, size_t, size_t) = __memcpy_chk;
static void *(*volatile p_memmove_chk)(void *, const void *, size_t, size_t) = __memmove_chk;
static void *(*volatile p_memset_chk)(void *, int, size_t, size_t) = __memset_chk;

static int failures = 0;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Threads of this process (/proc/self/task entries). */
static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Helper threads the preload's large calls have started (none outlives
 * its call, so threads() cannot tell); 0 without the preload. */
static unsigned long long helpers_started(void)
{
    struct bulkmem_preload_state s;
    bulkmem_preload_state_of(&s);
    return (unsigned long long)s.helpers_started;
}

static int finish(void)
{
    if (failures == 0)
        printf("ok\n");
    return failures == 0 ? 0 : 1;
}

/* --- handler ------------------------------------------------------------------------- */

#define HBUF (256 << 10)
static unsigned char h_src[HBUF], h_dst[HBUF];
static volatile sig_atomic_t h_calls, h_bad, h_signo, h_code, h_value;

static void copy_in_handler(unsigned char v)
{
    p_memset(h_src, v, HBUF);
    p_memcpy(h_dst, h_src, HBUF);
    if (h_dst[0] != v || h_dst[HBUF - 1] != v)
        h_bad = 1;
    h_calls++;
}

static void on_info(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    h_signo = si->si_signo;
    h_code = si->si_code;
    h_value = si->si_value.sival_int;
    copy_in_handler((unsigned char)sig);
}

static void on_plain(int sig) { copy_in_handler((unsigned char)(sig + 1)); }

static int scenario_handler(void)
{
    struct sigaction sa, old;
    union sigval v;
    void (*prev)(int);

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_info;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
    /* Reported back as installed. */
    EXPECT(sigaction(SIGUSR1, NULL, &old) == 0, "sigaction query");
    EXPECT(old.sa_sigaction == on_info, "old handler is not the program's");
    EXPECT(old.sa_flags & SA_SIGINFO, "SA_SIGINFO lost");

    v.sival_int = 4242;
    EXPECT(sigqueue(getpid(), SIGUSR1, v) == 0, "sigqueue: %s", strerror(errno));
    EXPECT(h_calls == 1, "handler ran %d times", (int)h_calls);
    EXPECT(h_signo == SIGUSR1 && h_code == SI_QUEUE && h_value == 4242,
           "siginfo: signo %d code %d value %d", (int)h_signo, (int)h_code, (int)h_value);

    /* A plain handler through sigaction, then through signal(). */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_plain;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGUSR2, &sa, &old) == 0, "sigaction");
    EXPECT(old.sa_handler == SIG_DFL, "SIGUSR2 was not SIG_DFL");
    raise(SIGUSR2);
    EXPECT(sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == on_plain &&
               !(old.sa_flags & SA_SIGINFO),
           "plain handler not reported back as installed");
    prev = signal(SIGUSR2, SIG_DFL);
    EXPECT(prev == on_plain, "signal() returned %p", (void *)prev);
    prev = signal(SIGPROF, on_plain);
    EXPECT(prev == SIG_DFL, "signal() returned %p", (void *)prev);
    raise(SIGPROF);
    prev = signal(SIGPROF, SIG_IGN);
    EXPECT(prev == on_plain, "signal() returned %p", (void *)prev);

    EXPECT(h_calls == 3, "handlers ran %d times", (int)h_calls);
    EXPECT(!h_bad, "a copy inside a handler went wrong");
    /* The deterministic check: nothing inside the handlers started a thread. */
    EXPECT(helpers_started() == 0, "%llu helpers started inside signal handlers",
           helpers_started());
    EXPECT(threads() == 1, "%d threads after large copies inside signal handlers", threads());

    /* Outside them helpers are used (BULKMEM_PRELOAD_THREADS=2), and gone
     * when the call returns. */
    p_memset(h_src, 9, HBUF);
    p_memcpy(h_dst, h_src, HBUF);
    EXPECT(h_dst[HBUF - 1] == 9, "copy outside handlers");
    EXPECT(helpers_started() > 0, "no helper started outside handlers");
    EXPECT(threads() == 1, "%d threads after the copy returned", threads());
    return finish();
}

/* --- alarm --------------------------------------------------------------------------- */

static volatile sig_atomic_t a_calls, a_bad;

static void on_alarm(int sig)
{
    (void)sig;
    p_memset(h_src, (int)(a_calls & 0xff), 8192);
    p_memcpy(h_dst, h_src, 8192);
    if (h_dst[8191] != (unsigned char)(a_calls & 0xff))
        a_bad = 1;
    a_calls++;
}

static int scenario_alarm(void)
{
    struct sigaction sa;
    struct itimerval it = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    void *slots[64] = {0};
    unsigned r = 12345;
    long i;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    EXPECT(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    EXPECT(setitimer(ITIMER_REAL, &it, NULL) == 0, "setitimer");
    /* Mostly inside malloc and free until enough alarms have landed. */
    for (i = 0; i < 50000000 && a_calls < 200; i++) {
        unsigned k = (r = r * 1103515245u + 12345u) >> 8;
        free(slots[k % 64]);
        slots[k % 64] = malloc(16 + k % 4000);
    }
    setitimer(ITIMER_REAL, &off, NULL);
    for (i = 0; i < 64; i++)
        free(slots[i]);
    EXPECT(a_calls > 0, "no alarm arrived");
    EXPECT(!a_bad, "a copy inside the handler went wrong");
    EXPECT(threads() == 1, "%d threads after large copies inside SIGALRM handlers", threads());
    return finish();
}

/* --- seccomp ------------------------------------------------------------------------- */

static int scenario_seccomp(void)
{
    size_t n = 64 << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    static const char ok[] = "ok\n", bad[] = "copy under seccomp went wrong\n";
    if (a == NULL || b == NULL)
        return 2;
    p_memset(a, 0, n); /* with helpers */
    p_memset(b, 0, n);
    a[7] = 7;
    a[n - 1] = 11;
    if (helpers_started() == 0 || threads() != 1) {
        fprintf(stderr, "FAIL: %llu helpers started, %d threads after the calls\n",
                helpers_started(), threads());
        return 1;
    }
    fflush(NULL);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
        fprintf(stderr, "FAIL: prctl(PR_SET_SECCOMP): %s\n", strerror(errno));
        return 1;
    }
    /* Only read, write, _exit and sigreturn from here. */
    p_memcpy(b, a, n);
    if (b[7] == 7 && b[n - 1] == 11 && b[8] == 0)
        (void)!write(1, ok, sizeof ok - 1);
    else
        (void)!write(2, bad, sizeof bad - 1);
    syscall(SYS_exit, 0);
    return 1;
}

/* Strict mode before any large call: bulkmem is not initialised yet (the
 * first large call does it, and that opens /proc/cpuinfo and the profile),
 * so the preload must initialise it before entering the sandbox. A copy
 * that opened a file afterwards would be killed (SIGKILL, exit 137). */
static int scenario_seccomp_cold(void)
{
    size_t n = 64 << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    static const char ok[] = "ok\n", bad[] = "copy under seccomp went wrong\n";
    if (a == NULL || b == NULL)
        return 2;
    for (size_t i = 0; i < n; i += 4096)
        a[i] = 1, b[i] = 0; /* touched without a large library call */
    a[n - 1] = 11;
    fflush(NULL);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
        fprintf(stderr, "FAIL: prctl(PR_SET_SECCOMP): %s\n", strerror(errno));
        return 1;
    }
    p_memcpy(b, a, n);
    p_memset(a, 0, n);
    if (b[4096] == 1 && b[n - 1] == 11 && a[n - 1] == 0)
        (void)!write(1, ok, sizeof ok - 1);
    else
        (void)!write(2, bad, sizeof bad - 1);
    syscall(SYS_exit, 0);
    return 1;
}

/* --- unshare ------------------------------------------------------------------------- */

static int scenario_unshare(int expect_threads)
{
    size_t n = 32 << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    if (a == NULL || b == NULL)
        return 2;
    p_memset(a, 5, n);
    p_memcpy(b, a, n);
    EXPECT(b[n - 1] == 5, "copy");
    if (expect_threads)
        EXPECT(helpers_started() > 0, "no helper started");
    EXPECT(threads() == 1, "%d threads after the calls returned", threads());
    EXPECT(unshare(CLONE_NEWUSER) == 0, "unshare(CLONE_NEWUSER): %s", strerror(errno));
    /* Copies go on afterwards (the engine may start again). */
    p_memset(a, 6, n);
    p_memcpy(b, a, n);
    EXPECT(b[0] == 6 && b[n - 1] == 6, "copy after unshare");
    return finish();
}

/* --- zero ---------------------------------------------------------------------------- */

static int scenario_zero(void)
{
    char c = 'x';
    EXPECT(p_memcpy(NULL, NULL, 0) == NULL, "memcpy");
    EXPECT(p_memmove(NULL, NULL, 0) == NULL, "memmove");
    EXPECT(p_memset(NULL, 0, 0) == NULL, "memset");
    EXPECT(p_memset(NULL, 'a', 0) == NULL, "memset");
    EXPECT(p_mempcpy(NULL, NULL, 0) == NULL, "mempcpy");
    EXPECT(p_memcpy_chk(NULL, NULL, 0, 0) == NULL, "__memcpy_chk");
    EXPECT(p_memmove_chk(NULL, NULL, 0, 0) == NULL, "__memmove_chk");
    EXPECT(p_memset_chk(NULL, 0, 0, 0) == NULL, "__memset_chk");
    EXPECT(p_memcpy(&c, NULL, 0) == &c && c == 'x', "memcpy to a real byte");
    EXPECT(p_memset(&c, 0, 0) == &c && c == 'x', "memset of a real byte");
    /* With BULKMEM_PRELOAD_MT_MIN=0, a zero-length call that reached bulkmem
     * would have started helpers. */
    EXPECT(helpers_started() == 0, "%llu helpers after zero-length calls only",
           helpers_started());
    EXPECT(threads() == 1, "%d threads after zero-length calls only", threads());
    return finish();
}

/* --- unwind -------------------------------------------------------------------------- */

typedef size_t (*state_fn)(struct bulkmem_preload_state *, size_t);
static state_fn state_in_handler;
static struct bulkmem_preload_state handler_state;

static void ask_state(int sig)
{
    (void)sig;
    state_in_handler(&handler_state, sizeof handler_state);
}

static int scenario_unwind(void)
{
    struct bulkmem_preload_state s;
    /* The engine open (a large copy), its unwinder not yet probed: a
     * handler's ask must not probe it (an unwind allocates and locks), so it
     * answers 0; once an ask outside has probed, handlers see the answer. */
    void *sym = dlsym(RTLD_DEFAULT, "bulkmem_preload_state");
    EXPECT(sym != NULL, "the preload exports bulkmem_preload_state");
    if (sym == NULL)
        return finish();
    memcpy(&state_in_handler, &sym, sizeof state_in_handler);
    unsigned char *a = calloc(1, 4 << 20), *b = calloc(1, 4 << 20);
    p_memcpy(b, a, 4 << 20);
    free(a);
    free(b);
    signal(SIGUSR1, ask_state);
    raise(SIGUSR1);
    EXPECT(handler_state.catches_panics == 0, "a signal handler's ask probed the unwinder");
    EXPECT(bulkmem_preload_state_of(&s), "the preload exports bulkmem_preload_state");
    EXPECT(s.catches_panics == 1, "an unwind inside the preload was not caught");
    raise(SIGUSR1);
    EXPECT(handler_state.catches_panics == 1, "a handler does not see the earlier probe");
    EXPECT(dlsym(RTLD_DEFAULT, "_Unwind_RaiseException") == NULL,
           "the preload's unwinder is private, yet _Unwind_RaiseException is visible");
    return finish();
}

/* --- fdstats ------------------------------------------------------------------------- */

static int scenario_fdstats(const char *path)
{
    static const char data[] = "data\n";
    int fd, i;
    for (i = 3; i < 1024; i++)
        close(i);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd != 3) {
        fprintf(stderr, "FAIL: the data file is fd %d, not 3\n", fd);
        return 1;
    }
    if (write(fd, data, sizeof data - 1) != (ssize_t)(sizeof data - 1))
        return 1;
    return finish(); /* exit runs the preload's report */
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    if (strcmp(s, "handler") == 0)
        return scenario_handler();
    if (strcmp(s, "alarm") == 0)
        return scenario_alarm();
    if (strcmp(s, "seccomp") == 0)
        return scenario_seccomp();
    if (strcmp(s, "seccomp-cold") == 0)
        return scenario_seccomp_cold();
    if (strcmp(s, "unshare") == 0)
        return scenario_unshare(getenv("LD_PRELOAD") != NULL);
    if (strcmp(s, "zero") == 0)
        return scenario_zero();
    if (strcmp(s, "unwind") == 0)
        return scenario_unwind();
    if (strcmp(s, "fdstats") == 0 && argc > 2)
        return scenario_fdstats(argv[2]);
    fprintf(stderr, "usage: %s handler|alarm|seccomp|seccomp-cold|unshare|zero|unwind|fdstats FILE\n", argv[0]);
    return 2;
}
