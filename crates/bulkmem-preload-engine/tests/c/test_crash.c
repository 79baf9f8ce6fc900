/* test_crash.c - crashes, signal dispositions and backtraces after large
 * memcpy/memset calls, run with and without libbulkmem_preload.so: the
 * suite (preload_suite.rs) runs each case in its own process several times
 * both ways and requires the same outcome (exit status or signal and the
 * OUTCOME lines) every time.
 *
 *   test_crash CASE
 *
 * Every case first makes a 64 MiB copy and a 64 MiB clear (mmap'ed
 * buffers) unless it says otherwise, so that the preload's engine is
 * active, and sets RLIMIT_CORE to 0, so that a crash writes no core file.
 * A watchdog alarm of 10 s makes a hang die of SIGALRM.
 *
 * Crashes (no handler of the program's: it dies as with the C library,
 * and never hangs):
 *   null               a write through a NULL pointer (SIGSEGV)
 *   raise-segv         raise(SIGSEGV)
 *   bus                a read beyond the end of a truncated file mapping
 *                      (SIGBUS)
 *   copy-fault         a 64 MiB copy whose destination's last page is
 *                      PROT_NONE (SIGSEGV)
 *   copy-fault-bus     a 64 MiB copy from a file mapping truncated at
 *                      24 MiB (SIGBUS)
 *   resethand-reraise  a SA_RESETHAND handler prints and returns; the NULL
 *                      write runs again and the default action kills
 *   resethand-raise    the same, the handler calling raise(SIGSEGV)
 * Dispositions the program can see:
 *   no-onstack         a 16 KiB sigaltstack, a SIGSEGV handler without
 *                      SA_ONSTACK: it runs on the thread's stack (it uses
 *                      64 KiB of it) and leaves with siglongjmp
 *   onstack            with SA_ONSTACK and a 64 KiB alternate stack: it
 *                      runs there, on the program's own, which is what
 *                      sigaltstack reports
 *   resethand-view     a SA_RESETHAND SIGSEGV handler sees SIG_DFL with
 *                      sigaction, in the handler and after it
 *   resethand-view-bus the same for SIGBUS (a truncated file mapping)
 *   ign-exec           SIGSEGV and SIGBUS ignored, copies of 64 and
 *                      256 MiB, then fork+execv and posix_spawn of
 *                      ign-child: the children inherit the SIG_IGN
 *   ign-child          (run by ign-exec) what it sees of SIGSEGV and
 *                      SIGBUS, then both sent to itself
 *   sigcgt             SigCgt and SigIgn of /proc/self/status after large
 *                      copies, with a SIGSEGV handler and without
 *   sigcgt-handler     a SIGBUS handler installed before the copies
 *   sigaction-view     what sigaction reports of an action it was given
 *                      (flags, restorer, the kernel's mask) for SIGSEGV,
 *                      SIGBUS and SIGUSR1,
 *                      before and after large copies, and what signal()
 *                      returns
 *   sigset-hold        sigset(SIG_HOLD), then a handler and SIG_DFL, for
 *                      SIGSEGV and SIGBUS: what each call returns
 *   kill-segv-during-copy  SIGSEGV sent to the process (kill) 16 times
 *                      while a second thread copies 64 MiB at a time, the
 *                      main thread blocking it: the program's handler runs
 *                      on the copying thread each time, never on a thread
 *                      of the preload's
 * Backtraces from handlers (frames 0..3 as the dladdr file names, and
 * frame 1's symbol):
 *   backtrace-usr1     no large copy; SIGUSR1 sent with kill
 *   backtrace-usr1-after-copy  the same after the large copies
 *   backtrace-segv     a SIGSEGV handler (a PROT_NONE page read)
 *
 * The copies go through a volatile pointer, so each is a real call of the
 * (possibly interposed) memcpy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "large_calls.h"


extern char **environ;


static size_t page;
static char *self_argv0;
static sigjmp_buf jump;


static void fill(unsigned char *p, size_t n)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < n / 8; i++)
        w[i] = i * 0x9e3779b97f4a7c15ull;
}

/* A copy and a clear of `mib` MiB through the (possibly interposed)
 * memcpy and memset; exit 2 if either is wrong. */
static void large(size_t mib)
{
    size_t n = mib * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n);
    p_memcpy(dst, src, n);
    if (memcmp(dst, src, n) != 0) {
        printf("OUTCOME the %zu MiB copy is wrong\n", mib);
        exit(2);
    }
    p_memset(dst, 0, n);
    if (dst[0] != 0 || dst[n / 2] != 0 || dst[n - 1] != 0) {
        printf("OUTCOME the %zu MiB clear is wrong\n", mib);
        exit(2);
    }
    munmap(src, n);
    munmap(dst, n);
}

static void large_copies(void)
{
    large(64);
    printf("OUTCOME large copies done\n");
}

static void no_core(void)
{
    struct rlimit r = {0, 0};
    if (setrlimit(RLIMIT_CORE, &r) != 0) {
        perror("setrlimit");
        exit(2);
    }
}

/* write(2) of a string: usable in handlers. */
static void say(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(1, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void null_write(void)
{
    volatile int *volatile p = NULL;
    *p = 1;
}

/* Two PROT_NONE pages (a read at 0 or at `page` faults). */
static volatile unsigned char *no_access(void)
{
    unsigned char *p = map(2 * page);
    mprotect(p, 2 * page, PROT_NONE);
    return p;
}

/* A file mapping of 2 pages whose file was truncated to 0: reading it is
 * SIGBUS. */
static volatile unsigned char *truncated_mapping(void)
{
    char path[] = "/tmp/bulkmem-crash-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, (off_t)(2 * page)) != 0) {
        perror("file");
        exit(2);
    }
    unsigned char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    p[0] = 1;
    if (ftruncate(fd, 0) != 0)
        exit(2);
    unlink(path);
    close(fd);
    return p;
}

static void install(int sig, void (*h)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) {
        perror("sigaction");
        exit(2);
    }
}

static void set_plain(int sig, void (*h)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0) {
        perror("sigaction");
        exit(2);
    }
}

/* ---- crashes ---- */

static void case_bus(void)
{
    volatile unsigned char *p = truncated_mapping();
    large_copies();
    printf("OUTCOME read %d\n", p[page]);
}

static void case_copy_fault(int bus)
{
    size_t n = 64 * MIB;
    unsigned char *src, *dst = map(n);
    if (bus) {
        char path[] = "/tmp/bulkmem-crash-XXXXXX";
        int fd = mkstemp(path);
        unlink(path);
        if (fd < 0 || ftruncate(fd, (off_t)n) != 0) {
            perror("file");
            exit(2);
        }
        src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (src == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
        fill(src, n);
        if (ftruncate(fd, (off_t)(24 * MIB)) != 0)
            exit(2);
        close(fd);
    } else {
        src = map(n);
        fill(src, n);
        mprotect(dst + n - page, page, PROT_NONE);
    }
    large_copies();
    p_memcpy(dst, src, n);
    printf("OUTCOME the faulting copy returned\n");
}

static void on_segv_return(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    say("OUTCOME handler ran\n");
}

static void on_segv_raise(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    say("OUTCOME handler ran\n");
    raise(SIGSEGV);
    say("OUTCOME raise returned in the handler\n");
}

static void case_resethand(int use_raise)
{
    install(SIGSEGV, use_raise ? on_segv_raise : on_segv_return, SA_RESETHAND);
    large_copies();
    null_write();
    printf("OUTCOME the NULL write returned\n");
}

/* ---- dispositions ---- */

static volatile int on_alt = -1, in_ours = -1, reports_ours = -1;
static volatile unsigned sink;
static char *alt_lo; /* the program's alternate stack */
static size_t alt_n;

/* Where the handler runs: on an alternate stack as sigaltstack says, its
 * frame within the program's, and sigaltstack naming the program's. */
static void note_stack(void)
{
    stack_t ss;
    volatile char here = 0;
    uintptr_t at = (uintptr_t)&here;
    if (sigaltstack(NULL, &ss) == 0) {
        on_alt = (ss.ss_flags & SS_ONSTACK) != 0;
        reports_ours = ss.ss_sp == alt_lo && ss.ss_size == alt_n;
    }
    in_ours = at >= (uintptr_t)alt_lo && at < (uintptr_t)alt_lo + alt_n;
}

static void on_segv_big(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    note_stack();
    volatile unsigned char a[64 * 1024];
    for (size_t i = 0; i < sizeof a; i += 256)
        a[i] = (unsigned char)i;
    sink += a[sizeof a - 256];
    siglongjmp(jump, 1);
}

static void on_segv_small(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    note_stack();
    volatile unsigned char a[8 * 1024];
    for (size_t i = 0; i < sizeof a; i += 256)
        a[i] = (unsigned char)i;
    sink += a[sizeof a - 256];
    siglongjmp(jump, 1);
}

static void case_onstack(int onstack)
{
    size_t n = onstack ? 64 * 1024 : 16 * 1024;
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = alt_lo = malloc(n);
    ss.ss_size = alt_n = n;
    if (ss.ss_sp == NULL || sigaltstack(&ss, NULL) != 0) {
        perror("sigaltstack");
        exit(2);
    }
    install(SIGSEGV, onstack ? on_segv_small : on_segv_big, onstack ? SA_ONSTACK : 0);
    static volatile unsigned char *bad;
    bad = no_access();
    large_copies();
    if (sigsetjmp(jump, 1) == 0) {
        sink += bad[0];
        printf("OUTCOME the read returned\n");
    } else {
        printf("OUTCOME onstack=%d, in the program's alternate stack %d, "
               "sigaltstack names the program's %d\n",
               on_alt, in_ours, reports_ours);
        printf("OUTCOME survived the fault\n");
    }
}

static void on_view(int sig, siginfo_t *si, void *uc);

static const char *disposition(int sig)
{
    struct sigaction o;
    if (sigaction(sig, NULL, &o) != 0)
        return "error";
    /* SA_RESETHAND resets the handler, not the flags: SA_SIGINFO may
     * remain beside SIG_DFL. */
    if (o.sa_handler == SIG_DFL)
        return "DFL";
    if (o.sa_handler == SIG_IGN)
        return "IGN";
    return o.sa_sigaction == on_view ? "ours" : "other";
}

static const char *volatile seen_inside = "none";

static void on_view(int sig, siginfo_t *si, void *uc)
{
    (void)si, (void)uc;
    seen_inside = disposition(sig);
    siglongjmp(jump, 1);
}

static void case_resethand_view(int bus)
{
    int sig = bus ? SIGBUS : SIGSEGV;
    install(sig, on_view, SA_RESETHAND);
    static volatile unsigned char *bad;
    bad = bus ? truncated_mapping() : no_access();
    large_copies();
    printf("OUTCOME before the fault: %s\n", disposition(sig));
    if (sigsetjmp(jump, 1) == 0) {
        sink += bad[page];
        printf("OUTCOME the read returned\n");
    } else {
        printf("OUTCOME in the handler: %s\n", seen_inside);
        printf("OUTCOME after it: %s\n", disposition(sig));
    }
}

/* "Name:\tvalue" of /proc/self/status as "OUTCOME Name value". */
static void status_line(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(name);
    if (!f) {
        printf("OUTCOME %s unreadable\n", name);
        return;
    }
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            char *v = line + n + 1;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = 0;
            printf("OUTCOME %s %s\n", name, v);
        }
    }
    fclose(f);
}

static void print_status(const char *how, int st)
{
    if (WIFEXITED(st))
        printf("OUTCOME %s: exit %d\n", how, WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("OUTCOME %s: signal %d\n", how, WTERMSIG(st));
    else
        printf("OUTCOME %s: other\n", how);
}

static void case_ign_exec(void)
{
    set_plain(SIGSEGV, SIG_IGN, 0);
    set_plain(SIGBUS, SIG_IGN, 0);
    large_copies();
    large(256);
    printf("OUTCOME 256 MiB copy done\n");
    char *args[] = {self_argv0, "ign-child", NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    print_status("fork+execv child", st);
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0) {
        printf("OUTCOME posix_spawn failed\n");
        return;
    }
    waitpid(pid, &st, 0);
    print_status("posix_spawn child", st);
}

static void case_ign_child(void)
{
    printf("OUTCOME child sees SIGSEGV %s, SIGBUS %s\n", disposition(SIGSEGV),
           disposition(SIGBUS));
    status_line("SigIgn");
    kill(getpid(), SIGBUS);
    kill(getpid(), SIGSEGV);
    printf("OUTCOME child survived\n");
}

static void on_any(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
}

static void case_sigcgt(void)
{
    large_copies();
    large(256);
    printf("OUTCOME 256 MiB copy done\n");
    status_line("SigCgt");
    status_line("SigIgn");
    install(SIGSEGV, on_any, 0);
    printf("OUTCOME with a SIGSEGV handler:\n");
    status_line("SigCgt");
    set_plain(SIGSEGV, SIG_DFL, 0);
    printf("OUTCOME SIGSEGV back to SIG_DFL:\n");
    status_line("SigCgt");
}

static void case_sigcgt_handler(void)
{
    install(SIGBUS, on_any, 0);
    large_copies();
    large(256);
    printf("OUTCOME 256 MiB copy done\n");
    status_line("SigCgt");
}

/* ---- backtraces ---- */

static const char *base(const char *path)
{
    const char *s;
    if (path == NULL || *path == 0)
        return "?";
    s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* One OUTCOME line: the files of frames 0..3 and frame 1's symbol. */
static void print_backtrace(void)
{
    void *frames[8];
    char line[512];
    int n = backtrace(frames, 8);
    size_t len = (size_t)snprintf(line, sizeof line, "OUTCOME backtrace:");
    for (int i = 0; i < 4; i++) {
        Dl_info d;
        const char *file = "-", *sym = NULL;
        if (i < n && dladdr(frames[i], &d) != 0) {
            file = base(d.dli_fname);
            sym = d.dli_sname ? d.dli_sname : "?";
        } else if (i < n) {
            file = "?";
            sym = "?";
        }
        if (len < sizeof line) {
            if (i == 1)
                len += (size_t)snprintf(line + len, sizeof line - len, " %s(%s)", file,
                                        sym ? sym : "-");
            else
                len += (size_t)snprintf(line + len, sizeof line - len, " %s", file);
        }
    }
    if (len < sizeof line - 1) {
        line[len++] = '\n';
        line[len] = 0;
    }
    say(line);
}

static void on_usr1(int sig)
{
    (void)sig;
    print_backtrace();
}

static void on_segv_backtrace(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    print_backtrace();
    siglongjmp(jump, 1);
}

/* backtrace() loads libgcc_s on its first call: not inside a handler. */
static void prime_backtrace(void)
{
    void *f[2];
    backtrace(f, 2);
}

static void case_backtrace_usr1(int copy)
{
    prime_backtrace();
    if (copy)
        large_copies();
    set_plain(SIGUSR1, on_usr1, 0);
    kill(getpid(), SIGUSR1);
    printf("OUTCOME after the handler\n");
}

static void case_backtrace_segv(void)
{
    prime_backtrace();
    static volatile unsigned char *bad;
    bad = no_access();
    install(SIGSEGV, on_segv_backtrace, 0);
    large_copies();
    if (sigsetjmp(jump, 1) == 0) {
        sink += bad[0];
        printf("OUTCOME the read returned\n");
    } else {
        printf("OUTCOME after the handler\n");
    }
}

static void view_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
}

/* Installs a handler with unusual flags and a mask that names SIGKILL (the
 * kernel drops it) and a real-time signal, then prints what sigaction
 * reports into a buffer filled with 0xa5 first. */
static void show_view(int sig)
{
    struct sigaction a, o;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = view_handler;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGUSR2);
    sigaddset(&a.sa_mask, SIGKILL);
    sigaddset(&a.sa_mask, 40);
    if (sigaction(sig, &a, NULL) != 0) {
        perror("sigaction");
        exit(2);
    }
    memset(&o, 0xa5, sizeof o);
    sigaction(sig, NULL, &o);
    /* The kernel's 64 signals only: glibc copies the rest of its own
     * uninitialised set there. */
    unsigned long word;
    memcpy(&word, &o.sa_mask, sizeof word);
    printf("OUTCOME signal %d: handler %s flags %#x restorer %s mask %#lx\n", sig,
           o.sa_sigaction == view_handler ? "ours" : "other", (unsigned)o.sa_flags,
           o.sa_restorer == NULL ? "null" : "set", word);
    void (*prev)(int) = signal(sig, SIG_IGN);
    printf("OUTCOME signal(%d, SIG_IGN) returned %s\n", sig,
           (void *)prev == (void *)view_handler ? "ours" : "other");
    prev = signal(sig, SIG_DFL);
    printf("OUTCOME signal(%d, SIG_DFL) returned %s\n", sig, prev == SIG_IGN ? "SIG_IGN" : "other");
}

static volatile pid_t copier_tid;
static volatile int copying, handled, elsewhere;

static void on_sent(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code > 0)
        return;
    if ((pid_t)syscall(SYS_gettid) != copier_tid)
        elsewhere = 1;
    handled++;
}

#define SENDS 16

static void *copy_until_sent(void *arg)
{
    (void)arg;
    size_t n = 64u << 20;
    unsigned char *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        exit(2);
    memset(a, 7, n);
    copier_tid = (pid_t)syscall(SYS_gettid);
    sigset_t segv;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    pthread_sigmask(SIG_UNBLOCK, &segv, NULL);
    for (int i = 0; i < 100000 && handled < SENDS; i++) {
        copying = 1;
        p_memcpy(b, a, n);
    }
    printf("OUTCOME copy right: %s\n", b[n - 1] == 7 ? "yes" : "no");
    return NULL;
}

static void case_kill_during_copy(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sent;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigset_t segv;
    sigemptyset(&segv);
    sigaddset(&segv, SIGSEGV);
    pthread_sigmask(SIG_BLOCK, &segv, NULL);
    pthread_t t;
    pthread_create(&t, NULL, copy_until_sent, NULL);
    while (!copying)
        sched_yield();
    for (int k = 0; k < SENDS; k++) {
        kill(getpid(), SIGSEGV);
        while (handled <= k)
            sched_yield();
    }
    pthread_join(t, NULL);
    printf("OUTCOME %d signals handled, every one on the copying thread: %s\n", handled,
           elsewhere ? "no" : "yes");
}

static void plain_handler(int sig) { (void)sig; }

static const char *handler_name(void (*h)(int))
{
    return h == SIG_HOLD  ? "SIG_HOLD"
           : h == SIG_DFL ? "SIG_DFL"
           : h == SIG_IGN ? "SIG_IGN"
           : h == SIG_ERR ? "SIG_ERR"
           : h == plain_handler ? "handler"
                                : "other";
}

/* sigset is deprecated, and still what some programs call. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void case_sigset_hold(void)
{
    int sigs[] = {SIGSEGV, SIGBUS};
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2; i++) {
            const char *a = handler_name(sigset(sigs[i], SIG_HOLD));
            const char *b = handler_name(sigset(sigs[i], plain_handler));
            const char *c = handler_name(sigset(sigs[i], SIG_DFL));
            printf("OUTCOME sigset(%d): hold -> %s, handler -> %s, default -> %s\n", sigs[i], a,
                   b, c);
        }
        if (round == 0)
            large_copies();
    }
}
#pragma GCC diagnostic pop

static void case_sigaction_view(void)
{
    int sigs[] = {SIGSEGV, SIGBUS, SIGUSR1};
    for (int i = 0; i < 3; i++)
        show_view(sigs[i]);
    large_copies();
    for (int i = 0; i < 3; i++)
        show_view(sigs[i]);
}

int main(int argc, char **argv)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    self_argv0 = argv[0];
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *c = argc > 1 ? argv[1] : "";
    alarm(10); /* watchdog: a hang dies of SIGALRM */
    no_core();
    if (!strcmp(c, "null")) {
        large_copies();
        null_write();
        printf("OUTCOME the NULL write returned\n");
    } else if (!strcmp(c, "raise-segv")) {
        large_copies();
        raise(SIGSEGV);
        printf("OUTCOME raise returned\n");
    } else if (!strcmp(c, "bus")) {
        case_bus();
    } else if (!strcmp(c, "copy-fault")) {
        case_copy_fault(0);
    } else if (!strcmp(c, "copy-fault-bus")) {
        case_copy_fault(1);
    } else if (!strcmp(c, "resethand-reraise")) {
        case_resethand(0);
    } else if (!strcmp(c, "resethand-raise")) {
        case_resethand(1);
    } else if (!strcmp(c, "no-onstack")) {
        case_onstack(0);
    } else if (!strcmp(c, "onstack")) {
        case_onstack(1);
    } else if (!strcmp(c, "resethand-view")) {
        case_resethand_view(0);
    } else if (!strcmp(c, "resethand-view-bus")) {
        case_resethand_view(1);
    } else if (!strcmp(c, "ign-exec")) {
        case_ign_exec();
    } else if (!strcmp(c, "ign-child")) {
        case_ign_child();
    } else if (!strcmp(c, "sigcgt")) {
        case_sigcgt();
    } else if (!strcmp(c, "sigcgt-handler")) {
        case_sigcgt_handler();
    } else if (!strcmp(c, "sigset-hold")) {
        case_sigset_hold();
    } else if (!strcmp(c, "kill-segv-during-copy")) {
        case_kill_during_copy();
    } else if (!strcmp(c, "sigaction-view")) {
        case_sigaction_view();
    } else if (!strcmp(c, "backtrace-usr1")) {
        case_backtrace_usr1(0);
    } else if (!strcmp(c, "backtrace-usr1-after-copy")) {
        case_backtrace_usr1(1);
    } else if (!strcmp(c, "backtrace-segv")) {
        case_backtrace_segv();
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
