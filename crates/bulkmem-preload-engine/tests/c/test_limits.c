/* test_limits.c - the limits and sandboxes a process lives in, met by its
 * first large memcpy (where libbulkmem_preload.so sets itself up: opens its
 * engine, puts its fault handler in front, may start helper threads). The
 * suite (preload_suite.rs) runs each case in its own process several times
 * with and without the preload and requires the same outcome (exit status
 * and the OUTCOME lines) every time: whatever the C library's memcpy does
 * under a limit, the preloaded one must do too.
 *
 *   test_limits CASE
 *
 * Sandboxes (the program's first copy is in a process born inside them):
 *   seccomp-kill       a child execs this program (seccomp-child) under a
 *                      seccomp allow-list (x86-64; elsewhere skipped) of
 *                      the system calls that exec and case take with the
 *                      C library alone; any other call kills the process
 *                      (SECCOMP_RET_KILL_PROCESS)
 *   seccomp-eperm      the same, any other call fails with EPERM
 *   seccomp-child      (run by those two) 64 and 256 MiB copies, a 64 MiB
 *                      clear
 * Small stacks (the first copy on them):
 *   stack-thread       a thread with a 16 KiB stack (PTHREAD_STACK_MIN)
 *   stack-ucontext16   a makecontext coroutine on a 16 KiB malloc'ed stack,
 *                      with a guard zone below it that must stay untouched
 *   stack-ucontext64   the same with 64 KiB
 *   stack-ulimit       a child execs this program (stack-ulimit-child)
 *                      with RLIMIT_STACK 64 KiB; it copies on its main
 *                      thread
 * Resource limits met by the first copy:
 *   rlimit-as          RLIMIT_AS 16 MiB + 192 KiB above what the process
 *                      maps, then the copy, then a 16 MiB malloc: the C
 *                      library's copy maps nothing and leaves room for it
 *   nofile             stderr is a data file (fd 2, as for a daemon) and
 *                      RLIMIT_NOFILE 3: the copy writes nothing there
 *   pids-max           (root, a pids cgroup; else skipped) a child in a
 *                      cgroup of its own with pids.max 7 copies 32 MiB
 *                      1500 times while a thread of its keeps five short
 *                      threads alive, replacing one at a time (a joined
 *                      one is waited out of the thread group first): the
 *                      program needs exactly 7 tasks, and every one of
 *                      its pthread_create calls succeeds
 *   sched-fifo         (root, SCHED_FIFO allowed; else skipped) copies on
 *                      a SCHED_FIFO thread: no helper thread starts for a
 *                      real-time caller (bulkmem_preload_state's helpers_started,
 *                      0 without the preload)
 *
 * The copies go through a volatile pointer, so each is a real call of the
 * (possibly interposed) memcpy; the buffers are filled by loops that the
 * compiler cannot turn into memset calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "bulkmem_preload_state.h"

#include "large_calls.h"
#endif

#define KIB ((size_t)1 << 10)

extern char **environ;


static const char *self;


/* A pattern no compiler turns into a memset call. */
static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint64_t *w = (uint64_t *)(void *)p;
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
    for (size_t i = 0; i < n / 8; i++)
        w[i] = x + i * 0x0101010101010101ull;
}

static int all_zero(const unsigned char *p, size_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t o = 0;
    for (size_t i = 0; i < n / 8; i++)
        o |= w[i];
    return o == 0;
}

static const char *yes(int b) { return b ? "yes" : "no"; }


/* How a child ended, as an OUTCOME line. */
static void report_child(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st))
        printf("OUTCOME child exit %d\n", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        printf("OUTCOME child signal %d\n", WTERMSIG(st));
    else
        printf("OUTCOME child status %d\n", st);
}

/* 64 and 256 MiB copies and a 64 MiB clear, checked. */
static int big_copies(void)
{
    int ok = 1;
    size_t sizes[2] = {64 * MIB, 256 * MIB};
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        unsigned char *src = map(n), *dst = map(n);
        fill(src, n, (unsigned)i);
        p_memcpy(dst, src, n);
        ok &= memcmp(dst, src, n) == 0;
        if (i == 0) {
            p_memset(dst, 0, n);
            ok &= all_zero(dst, n);
        }
        munmap(src, n);
        munmap(dst, n);
    }
    return ok;
}

/* ---- seccomp ------------------------------------------------------------ */

#if defined(__x86_64__)
/* What execve of this program and seccomp-child take with glibc alone
 * (strace -f of the child under glibc 2.36: the dynamic loader, libc's
 * start-up, main's setrlimit and alarm, the copies' mmap and munmap,
 * stdio, exit), and fstat, which older glibc calls for newfstatat. */
static const int allowed[] = {
    SYS_execve,     SYS_brk,         SYS_arch_prctl, SYS_set_tid_address,
    SYS_set_robust_list, SYS_rseq,   SYS_prlimit64,  SYS_mprotect,
    SYS_mmap,       SYS_munmap,      SYS_openat,     SYS_read,
    SYS_pread64,    SYS_close,       SYS_fstat,      SYS_newfstatat,
    SYS_access,     SYS_getrandom,   SYS_write,      SYS_exit_group,
    SYS_alarm,
};

static void sandbox(unsigned deflt)
{
    struct sock_filter f[8 + 2 * sizeof allowed / sizeof allowed[0]];
    size_t k = 0;
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)allowed[i], 0, 1);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, deflt);
    struct sock_fprog prog = {(unsigned short)k, f};
    /* Raw system calls: the preload interposes prctl, and this sandbox
     * must be the program's own business. */
    if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
        perror("seccomp");
        _exit(3);
    }
}

static void case_seccomp(unsigned deflt)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {(char *)"test_limits", (char *)"seccomp-child", NULL};
        sandbox(deflt);
        execve(self, argv, environ);
        _exit(4);
    }
    report_child(pid);
}
#else
static void case_seccomp(unsigned deflt)
{
    (void)deflt;
    printf("OUTCOME skipped: the allow-list is x86-64's\n");
}
#define SECCOMP_RET_KILL_PROCESS 0
#define SECCOMP_RET_ERRNO 0
#endif

static void case_seccomp_child(void)
{
    printf("OUTCOME copies right in the sandbox: %s\n", yes(big_copies()));
}

/* ---- small stacks ------------------------------------------------------- */

static unsigned char *s_src, *s_dst, *s_clr;
static const size_t S_N = 32 * MIB;

static void stack_buffers(void)
{
    s_src = map(S_N);
    s_dst = map(S_N);
    s_clr = map(S_N);
    fill(s_src, S_N, 1);
    fill(s_clr, S_N, 2);
}

/* The first large calls of the process: a 32 MiB copy and clear. */
static void *stack_job(void *arg)
{
    p_memcpy(s_dst, s_src, S_N);
    p_memset(s_clr, 0, S_N);
    return arg;
}

static void stack_report(void)
{
    printf("OUTCOME copy right: %s\n", yes(memcmp(s_dst, s_src, S_N) == 0));
    printf("OUTCOME clear right: %s\n", yes(all_zero(s_clr, S_N)));
}

static void case_stack_thread(void)
{
    stack_buffers();
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (pthread_attr_setstacksize(&a, 16 * KIB) != 0)
        pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN);
    pthread_t t;
    int rc = pthread_create(&t, &a, stack_job, NULL);
    if (rc == 0)
        pthread_join(t, NULL);
    printf("OUTCOME pthread_create: %d\n", rc);
    if (rc == 0)
        stack_report();
}

static ucontext_t uc_main, uc_co;

static void co_body(void) { stack_job(NULL); }

/* A coroutine's stack of `size` bytes on the heap, and below it a guard
 * zone filled with a pattern: the coroutine must leave it as it was (a
 * malloc'ed stack has no guard page; what runs past it writes the heap). */
static void case_stack_ucontext(size_t size)
{
    const size_t guard = 1 * MIB;
    stack_buffers();
    unsigned char *mem = malloc(guard + size);
    if (!mem) {
        perror("malloc");
        exit(2);
    }
    for (size_t i = 0; i < guard + size; i++)
        ((volatile unsigned char *)mem)[i] = (unsigned char)(0xa5 ^ (i >> 12));
    getcontext(&uc_co);
    uc_co.uc_stack.ss_sp = mem + guard;
    uc_co.uc_stack.ss_size = size;
    uc_co.uc_link = &uc_main;
    makecontext(&uc_co, co_body, 0);
    if (swapcontext(&uc_main, &uc_co) != 0) {
        perror("swapcontext");
        exit(2);
    }
    size_t low = guard + size; /* the lowest byte the coroutine wrote */
    for (size_t i = 0; i < guard + size; i++)
        if (mem[i] != (unsigned char)(0xa5 ^ (i >> 12))) {
            low = i;
            break;
        }
    /* stderr only: the depth is not deterministic. */
    fprintf(stderr, "coroutine stack used: about %zu bytes of %zu\n", guard + size - low, size);
    printf("OUTCOME back from the coroutine, its stack stayed in its %zu KiB: %s\n",
           size / KIB, yes(low >= guard));
    stack_report();
    free(mem);
}

/* The environment a re-executed child keeps: the preload's (its initial
 * stack must not depend on the caller's environment). */
static char **preload_env(void)
{
    static char *env[64];
    size_t k = 0;
    for (char **e = environ; *e && k < 63; e++)
        if (!strncmp(*e, "LD_PRELOAD=", 11) || !strncmp(*e, "BULKMEM_", 8))
            env[k++] = *e;
    env[k] = NULL;
    return env;
}

static void case_stack_ulimit(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit r;
        getrlimit(RLIMIT_STACK, &r);
        r.rlim_cur = 64 * KIB;
        if (setrlimit(RLIMIT_STACK, &r) != 0) {
            perror("setrlimit");
            _exit(3);
        }
        char *argv[] = {(char *)"test_limits", (char *)"stack-ulimit-child", NULL};
        execve(self, argv, preload_env());
        _exit(4);
    }
    report_child(pid);
}

static void case_stack_ulimit_child(void)
{
    stack_buffers();
    stack_job(NULL);
    stack_report();
}

/* ---- resource limits ---------------------------------------------------- */

/* VmSize from /proc/self/status, in bytes (read without stdio, which
 * would allocate). */
static size_t vm_size(void)
{
    char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *v = strstr(buf, "VmSize:");
    return v ? (size_t)strtoull(v + 7, NULL, 10) * KIB : 0;
}

static void case_rlimit_as(void)
{
    size_t n = 64 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n, 3);
    fill(dst, n, 4);
    printf("OUTCOME buffers ready\n"); /* stdout's buffer allocated */
    size_t vm = vm_size();
    if (vm == 0) {
        printf("OUTCOME skipped: no VmSize\n");
        return;
    }
    struct rlimit r;
    getrlimit(RLIMIT_AS, &r);
    /* Room for the malloc below (a 16 MiB + 4 KiB mapping) and 188 KiB
     * more: less than one helper thread's stack or the engine. */
    r.rlim_cur = vm + 16 * MIB + 192 * KIB;
    if (setrlimit(RLIMIT_AS, &r) != 0) {
        perror("setrlimit");
        exit(2);
    }
    p_memcpy(dst, src, n);
    printf("OUTCOME copy right: %s\n", yes(memcmp(dst, src, n) == 0));
    fprintf(stderr, "the copy mapped %zu KiB\n", (vm_size() - vm) / KIB);
    size_t m = 16 * MIB;
    unsigned char *more = malloc(m);
    if (more)
        for (size_t i = 0; i < m; i += 4096)
            more[i] = (unsigned char)i;
    printf("OUTCOME malloc(16 MiB) after the copy: %s\n", more ? "ok" : "NULL");
    free(more);
}

static void case_nofile(void)
{
    char path[] = "/tmp/bulkmem-limits-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(2);
    }
    unlink(path);
    if (dup2(fd, 2) != 2)
        exit(2);
    close(fd);
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    for (int i = 3; i < (int)(r.rlim_cur < 65536 ? r.rlim_cur : 65536); i++)
        close(i);
    r.rlim_cur = 3;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0)
        exit(2);
    size_t n = 64 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n, 5);
    p_memcpy(dst, src, n);
    int ok = memcmp(dst, src, n) == 0;
    p_memset(dst, 0, n);
    ok &= all_zero(dst, n);
    printf("OUTCOME copies right: %s\n", yes(ok));
    struct stat st;
    if (fstat(2, &st) != 0)
        exit(2);
    printf("OUTCOME data file bytes=%lld\n", (long long)st.st_size);
}

/* pids-max: the program keeps SHORTS threads alive beside its main thread
 * and the one that starts them: 2 + SHORTS = pids.max tasks. */
#define SHORTS 5
#define PIDS_MAX "7"

struct shortlived {
    pthread_t t;
    int alive;
    volatile int go;
    volatile pid_t tid;
};
static struct shortlived shorts[SHORTS];
static volatile int copies_done;
static int create_failures, creates;

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void *short_body(void *arg)
{
    struct shortlived *s = arg;
    s->tid = tid();
    while (!s->go)
        pause_us(50);
    return NULL;
}

/* Joins `s` and waits until its task is gone from the thread group (a
 * joined thread counts in pids.current for a moment longer). */
static void retire(struct shortlived *s)
{
    s->go = 1;
    pthread_join(s->t, NULL);
    while (syscall(SYS_tgkill, getpid(), s->tid, 0) == 0)
        pause_us(10);
    s->alive = 0;
}

static void *spawner(void *arg)
{
    for (unsigned i = 0; !copies_done; i++) {
        struct shortlived *s = &shorts[i % SHORTS];
        if (s->alive)
            retire(s);
        pause_us(200); /* a task free for a moment */
        s->go = 0;
        s->tid = 0;
        creates++;
        int rc = pthread_create(&s->t, NULL, short_body, s);
        if (rc == 0)
            s->alive = 1;
        else
            create_failures++;
    }
    for (int i = 0; i < SHORTS; i++)
        if (shorts[i].alive)
            retire(&shorts[i]);
    return arg;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int pids_child(const char *dir, const char *base, int v2)
{
    if (v2) {
        char ctl[256], buf[512] = "";
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", base);
        int fd = open(ctl, O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
        if (fd >= 0)
            close(fd);
        if (n < 0)
            return 3;
        if (!strstr(buf, "pids") && write_file(base, "cgroup.subtree_control", "+pids") != 0)
            return 3;
    }
    char num[32];
    if (mkdir(dir, 0755) != 0 || write_file(dir, "pids.max", PIDS_MAX) != 0)
        return 3;
    snprintf(num, sizeof num, "%d", (int)getpid());
    if (write_file(dir, "cgroup.procs", num) != 0)
        return 3;
    size_t n = 32 * MIB;
    unsigned char *src = map(n), *dst = map(n);
    fill(src, n, 6);
    pthread_t sp;
    if (pthread_create(&sp, NULL, spawner, NULL) != 0)
        return 5;
    for (int i = 0; i < 1500; i++)
        p_memcpy(dst, src, n);
    copies_done = 1;
    pthread_join(sp, NULL);
    printf("OUTCOME copies right: %s\n", yes(memcmp(dst, src, n) == 0));
    printf("OUTCOME failures=%d\n", create_failures);
    fprintf(stderr, "%d pthread_create calls\n", creates);
    return 0;
}

static void case_pids_max(void)
{
    const char *skip = "OUTCOME skipped: no pids cgroup\n";
    int v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
    const char *base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/pids";
    char dir[128];
    snprintf(dir, sizeof dir, "%s/bulkmem-test-%d", base, (int)getpid());
    if (geteuid() != 0 || access(base, W_OK) != 0) {
        printf("%s", skip);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int rc = pids_child(dir, base, v2);
        fflush(NULL);
        _exit(rc);
    }
    alarm(25);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    for (int i = 0; i < 100 && rmdir(dir) != 0 && errno == EBUSY; i++)
        pause_us(10000);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        printf("%s", skip);
    else if (WIFEXITED(st))
        printf("OUTCOME child exit %d\n", WEXITSTATUS(st));
    else
        printf("OUTCOME child signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
}

static void case_sched_fifo(void)
{
    unsigned char *a = map(64 * MIB), *b = map(64 * MIB);
    unsigned char *c = map(256 * MIB), *d = map(256 * MIB);
    fill(a, 64 * MIB, 7);
    fill(c, 256 * MIB, 8);
    fill(b, 64 * MIB, 9);
    fill(d, 256 * MIB, 10);
    struct sched_param sp = {.sched_priority = 10};
    if (geteuid() != 0 || sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
        printf("OUTCOME skipped: no SCHED_FIFO\n");
        return;
    }
    p_memcpy(b, a, 64 * MIB);
    p_memcpy(d, c, 256 * MIB);
    p_memset(d, 0, 256 * MIB);
    struct sched_param back = {.sched_priority = 0};
    sched_setscheduler(0, SCHED_OTHER, &back);
    int ok = memcmp(a, b, 64 * MIB) == 0 && all_zero(d, 256 * MIB);
    printf("OUTCOME copies right: %s\n", yes(ok));
    struct bulkmem_preload_state st;
    bulkmem_preload_state_of(&st);
    printf("OUTCOME helpers=%llu\n", (unsigned long long)st.helpers_started);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    alarm(20); /* watchdog: a hang dies of SIGALRM */
    self = "/proc/self/exe";
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "seccomp-kill")) {
        case_seccomp(SECCOMP_RET_KILL_PROCESS);
    } else if (!strcmp(c, "seccomp-eperm")) {
        case_seccomp(SECCOMP_RET_ERRNO | EPERM);
    } else if (!strcmp(c, "seccomp-child")) {
        case_seccomp_child();
    } else if (!strcmp(c, "stack-thread")) {
        case_stack_thread();
    } else if (!strcmp(c, "stack-ucontext16")) {
        case_stack_ucontext(16 * KIB);
    } else if (!strcmp(c, "stack-ucontext64")) {
        case_stack_ucontext(64 * KIB);
    } else if (!strcmp(c, "stack-ulimit")) {
        case_stack_ulimit();
    } else if (!strcmp(c, "stack-ulimit-child")) {
        case_stack_ulimit_child();
    } else if (!strcmp(c, "rlimit-as")) {
        case_rlimit_as();
    } else if (!strcmp(c, "nofile")) {
        case_nofile();
    } else if (!strcmp(c, "pids-max")) {
        case_pids_max();
    } else if (!strcmp(c, "sched-fifo")) {
        case_sched_fifo();
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
