/* test_invisible.c - what a program can observe of a large memcpy, run
 * with and without libbulkmem_preload.so: the suite (preload_suite.rs)
 * runs each case in its own process several times both ways and requires
 * the same outcome (exit status and the OUTCOME lines) every time.
 *
 *   test_invisible CASE
 *
 * Faults (the program's handler must run on the calling thread, with its
 * thread-local values, and may leave with siglongjmp or repair and
 * return):
 *   segv-longjmp       64 MiB copy, a PROT_NONE source page at 40 MiB
 *   segv-longjmp-thread  the same on a second thread, which is joined
 *   bus-longjmp        a source file mapping truncated at 24 MiB (SIGBUS)
 *   segv-repair        the handler makes the page readable and returns
 *   segv-longjmp-signal, bus-longjmp-signal
 *                      as segv-longjmp and bus-longjmp, the handler
 *                      installed with signal() (no SA_SIGINFO)
 * Leaving early (nothing may write the destination afterwards, and no
 * thread of the library's may remain):
 *   alarm-longjmp      a SIGALRM handler siglongjmps out of a 256 MiB copy
 * Signals (the library's threads must not take process-directed ones):
 *   sigterm-sigwait    a copy, then SIGTERM blocked and read with sigwait
 *   sigterm-signalfd   the same with signalfd
 * Thread budget:
 *   nproc              (root) a copy, then as nobody with RLIMIT_NPROC 2
 *                      a copy and pthread_create
 *   copies             64 MiB copies and clears, checked (for valgrind)
 *   overread-small     a 116-byte memcpy from a 100-byte heap block (for
 *                      valgrind's memcheck, which reports it in its own
 *                      replacement of the C library's routine)
 *
 * The copies go through a volatile pointer, so each is a real call of the
 * (possibly interposed) memcpy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "large_calls.h"



static size_t page;
static sigjmp_buf jump;
static __thread int guarded;       /* set around the copy on its thread */
static volatile pid_t copier;      /* gettid() of the copying thread */
static volatile pid_t handler_tid; /* gettid() in the handler */
static volatile int handler_guarded = -1;
static volatile int handler_signal;
static volatile uintptr_t handler_addr;
static uintptr_t bad_lo, bad_hi;   /* the page that faults */



static void fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        for (size_t j = i; j < i + 4096 && j < n; j++)
            p[j] = (unsigned char)(j * 7 + (j >> 12));
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    handler_tid = tid();
    handler_guarded = guarded;
    handler_signal = sig;
    handler_addr = (uintptr_t)si->si_addr;
    siglongjmp(jump, 1);
}

static void on_fault_repair(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    handler_tid = tid();
    handler_guarded = guarded;
    handler_signal = sig;
    handler_addr = (uintptr_t)si->si_addr;
    mprotect((void *)bad_lo, page, PROT_READ);
}

/* Set by the -signal cases: the handler is installed with signal(), so
 * without SA_SIGINFO, and takes the signal number only. */
static int plain_handler;

static void on_fault_plain(int sig)
{
    handler_tid = tid();
    handler_guarded = guarded;
    handler_signal = sig;
    handler_addr = bad_lo; /* not told: the report's address check passes */
    siglongjmp(jump, 1);
}

static void handle(int sig, void (*h)(int, siginfo_t *, void *))
{
    if (plain_handler && h == on_fault) {
        signal(sig, on_fault_plain);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* The handler's view of the fault, as an OUTCOME line. */
static void report_fault(const char *how)
{
    printf("OUTCOME %s: signal %d, on the copying thread %s, its thread-local %d, "
           "address in the bad pages %s\n",
           how, handler_signal, handler_tid == copier ? "yes" : "no", handler_guarded,
           handler_addr >= bad_lo && handler_addr < bad_hi ? "yes" : "no");
}

/* A 64 MiB copy whose source faults at `bad` (PROT_NONE page or a file
 * mapping truncated there), caught with siglongjmp. */
static void *fault_copy(void *arg)
{
    int bus = arg != NULL;
    size_t n = 64 * MIB, bad = bus ? 24 * MIB : 40 * MIB;
    /* Static: kept across the siglongjmp. */
    static unsigned char *src, *dst;
    dst = map(n);
    if (bus) {
        char path[] = "/tmp/bulkmem-invisible-XXXXXX";
        int fd = mkstemp(path);
        unlink(path);
        if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
            perror("file");
            exit(2);
        }
        src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        fill(src, n);
        if (ftruncate(fd, (off_t)bad) != 0)
            exit(2);
        close(fd);
    } else {
        src = map(n);
        fill(src, n);
        mprotect(src + bad, page, PROT_NONE);
    }
    /* Every page from the truncation on faults: the first one touched
     * is the copy's business. */
    bad_lo = (uintptr_t)src + bad;
    bad_hi = bus ? (uintptr_t)src + n : bad_lo + page;
    copier = tid();
    handle(bus ? SIGBUS : SIGSEGV, on_fault);
    if (sigsetjmp(jump, 1) == 0) {
        guarded = 1;
        p_memcpy(dst, src, n);
        guarded = 0;
        printf("OUTCOME the copy returned\n");
    } else {
        guarded = 0;
        report_fault("siglongjmp");
    }
    return NULL;
}

static void case_repair(void)
{
    size_t n = 64 * MIB, bad = 40 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n);
    mprotect(src + bad, page, PROT_NONE);
    bad_lo = (uintptr_t)src + bad;
    bad_hi = bad_lo + page;
    copier = tid();
    handle(SIGSEGV, on_fault_repair);
    guarded = 1;
    p_memcpy(dst, src, n);
    guarded = 0;
    report_fault("repaired and returned");
    printf("OUTCOME the whole copy is right: %s\n", memcmp(dst, src, n) == 0 ? "yes" : "no");
}

static volatile int alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
    siglongjmp(jump, 1);
}

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i += 64)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void case_alarm(void)
{
    static size_t n = 256 * MIB;
    static unsigned char *src, *dst;
    src = map(n);
    dst = map(n);
    fill(src, n);
    p_memset(dst, 0, n);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    static volatile int left_early, attempt;
    for (attempt = 0; attempt < 50 && !left_early; attempt++) {
        if (sigsetjmp(jump, 1) == 0) {
            struct itimerval t = {{0, 0}, {0, 2000 + attempt * 500}};
            setitimer(ITIMER_REAL, &t, NULL);
            p_memcpy(dst, src, n);
            struct itimerval off = {{0, 0}, {0, 0}};
            setitimer(ITIMER_REAL, &off, NULL);
            p_memset(dst, 0, n); /* finished before the alarm: again */
        } else {
            left_early = 1;
        }
    }
    printf("OUTCOME left the copy with siglongjmp: %s\n", left_early ? "yes" : "no");
    uint64_t before = hash(dst, n);
    struct timespec ms100 = {0, 100 * 1000 * 1000};
    nanosleep(&ms100, NULL);
    printf("OUTCOME the destination stayed as it was: %s\n", hash(dst, n) == before ? "yes" : "no");
    munmap(dst, n);
    nanosleep(&ms100, NULL);
    printf("OUTCOME alive after unmapping it, threads: %d\n", threads_now());
    int rc = unshare(CLONE_NEWUSER);
    printf("OUTCOME unshare(CLONE_NEWUSER): %s\n",
           rc == 0 ? "0" : errno == EINVAL ? "EINVAL (threaded)" : "refused otherwise");
}

static void case_sigterm(int use_signalfd)
{
    /* A daemon's order: work first, then block SIGTERM to read it. */
    size_t n = 64 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n);
    p_memcpy(dst, src, n);
    printf("OUTCOME copied: %s\n", memcmp(dst, src, n) == 0 ? "yes" : "no");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    p_memcpy(dst, src, n);
    int fd = use_signalfd ? signalfd(-1, &set, 0) : -1;
    kill(getpid(), SIGTERM);
    int got = 0;
    if (use_signalfd) {
        struct signalfd_siginfo si;
        if (read(fd, &si, sizeof si) == (ssize_t)sizeof si)
            got = (int)si.ssi_signo;
    } else {
        sigwait(&set, &got);
    }
    printf("OUTCOME read SIGTERM through %s: %s\n", use_signalfd ? "signalfd" : "sigwait",
           got == SIGTERM ? "yes" : "no");
}

static void *nothing(void *arg) { return arg; }

static void case_nproc(void)
{
    if (geteuid() != 0) {
        printf("OUTCOME skipped: not root\n");
        return;
    }
    size_t n = 64 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n);
    p_memcpy(dst, src, n);
    printf("OUTCOME copied: %s\n", memcmp(dst, src, n) == 0 ? "yes" : "no");
    /* Then the budget tightens: as nobody (whose only process this is),
     * at most two tasks. */
    if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
        printf("OUTCOME skipped: cannot become nobody\n");
        return;
    }
    struct rlimit r = {2, 2};
    setrlimit(RLIMIT_NPROC, &r);
    p_memcpy(dst, src, n);
    pthread_t t;
    int rc = pthread_create(&t, NULL, nothing, NULL);
    printf("OUTCOME pthread_create after the copies: %s\n", rc == 0 ? "0" : strerror(rc));
    if (rc == 0)
        pthread_join(t, NULL);
}

static void case_copies(void)
{
    size_t n = 64 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n);
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        p_memcpy(dst, src, n);
        ok &= memcmp(dst, src, n) == 0;
        p_memset(dst, 0, n);
        ok &= dst[n / 2] == 0 && dst[n - 1] == 0;
    }
    printf("OUTCOME copies and clears right: %s\n", ok ? "yes" : "no");
}

int main(int argc, char **argv)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *c = argc > 1 ? argv[1] : "";
    alarm(60); /* watchdog: a hang dies of SIGALRM (alarm-longjmp disarms it) */
    if (!strcmp(c, "segv-longjmp")) {
        fault_copy(NULL);
    } else if (!strcmp(c, "segv-longjmp-thread")) {
        pthread_t t;
        pthread_create(&t, NULL, fault_copy, NULL);
        pthread_join(t, NULL);
        printf("OUTCOME joined the copying thread\n");
    } else if (!strcmp(c, "bus-longjmp")) {
        fault_copy((void *)1);
    } else if (!strcmp(c, "segv-longjmp-signal")) {
        plain_handler = 1;
        fault_copy(NULL);
    } else if (!strcmp(c, "bus-longjmp-signal")) {
        plain_handler = 1;
        fault_copy((void *)1);
    } else if (!strcmp(c, "segv-repair")) {
        case_repair();
    } else if (!strcmp(c, "alarm-longjmp")) {
        alarm(0);
        case_alarm();
    } else if (!strcmp(c, "sigterm-sigwait")) {
        case_sigterm(0);
    } else if (!strcmp(c, "sigterm-signalfd")) {
        case_sigterm(1);
    } else if (!strcmp(c, "nproc")) {
        case_nproc();
    } else if (!strcmp(c, "copies")) {
        case_copies();
    } else if (!strcmp(c, "overread-small")) {
        unsigned char *s = malloc(100), *d = malloc(200);
        memset(s, 1, 100);
        p_memcpy(d, s, 116);
        printf("OUTCOME the copy returned %d\n", d[3]);
        free(s);
        free(d);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
