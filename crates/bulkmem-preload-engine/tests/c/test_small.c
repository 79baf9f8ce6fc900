/* test_small.c - what a program can observe of a fault inside a small
 * memcpy, memmove, mempcpy, __memcpy_chk or memset (up to 4 KiB: the
 * preload does these itself, in the interposed function), run with and
 * without libbulkmem_preload.so: the suite (preload_suite.rs) runs each
 * case in its own process several times both ways and requires the same
 * outcome (exit status or signal and the OUTCOME lines) every time.
 *
 *   test_small CASE
 *
 *   segv-longjmp   every function and length, its source (copies) or its
 *                  destination running into a PROT_NONE page: the
 *                  program's handler runs on the calling thread, is told
 *                  an address in that page, and leaves with siglongjmp
 *   segv-repair    the same, the handler making the page accessible and
 *                  returning: the call completes, and its result is right
 *   bus-longjmp    copies from a file mapping truncated under them
 *                  (SIGBUS)
 *   crash          no handler: a small copy into a PROT_NONE page kills
 *                  the process with SIGSEGV
 *
 * The calls go through volatile function pointers, so each is a real call
 * of the (possibly interposed) function. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "large_calls.h"

extern void *__memcpy_chk(void *, const void *, size_t, size_t);

static void *(*volatile p_memmove)(void *, const void *, size_t) = memmove;
static void *(*volatile p_mempcpy)(void *, const void *, size_t) = mempcpy;
static void *(*volatile p_memcpy_chk)(void *, const void *, size_t, size_t) = __memcpy_chk;

static const size_t lens[] = {1, 3, 8, 17, 33, 100, 257, 512, 513, 1000, 2500, 4096};
#define N_LENS (sizeof lens / sizeof lens[0])

enum { MEMCPY, MEMMOVE, MEMPCPY, MEMCPY_CHK, MEMSET, N_FN };

static size_t page;
static sigjmp_buf jump;
static pid_t caller;
static uintptr_t bad_lo, bad_hi;
/* What the handler saw: faults, and how many were on the calling thread
 * with an address in the bad page. */
static volatile int faults, right;
static int repair;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    faults++;
    right += tid() == caller && a >= bad_lo && a < bad_hi;
    if (repair) {
        mprotect((void *)bad_lo, page, PROT_READ | PROT_WRITE);
        return;
    }
    siglongjmp(jump, 1);
}

static void handle(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void call(int fn, unsigned char *d, const unsigned char *s, size_t n)
{
    switch (fn) {
    case MEMCPY: p_memcpy(d, s, n); break;
    case MEMMOVE: p_memmove(d, s, n); break;
    case MEMPCPY: p_mempcpy(d, s, n); break;
    case MEMCPY_CHK: p_memcpy_chk(d, s, n, n); break;
    default: p_memset(d, 0x5a, n); break;
    }
}

/* The call, caught: 1 if it returned, 0 if the handler left it. */
static int try_call(int fn, unsigned char *d, const unsigned char *s, size_t n)
{
    if (sigsetjmp(jump, 1) == 0) {
        call(fn, d, s, n);
        return 1;
    }
    return 0;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

/* Each function and length with its source (copies; `src_side`) or its
 * destination starting 40 bytes below a page that faults (or the middle
 * of the length below it, for short ones). */
static void faulting_calls(int src_side)
{
    unsigned char *a = map(4 * page), *b = map(4 * page);
    int calls = 0, returned = 0, whole = 0;
    for (int fn = 0; fn < N_FN; fn++) {
        if (src_side && fn == MEMSET)
            continue;
        for (size_t i = 0; i < N_LENS; i++) {
            size_t n = lens[i], before = n > 80 ? 40 : n / 2;
            /* The faulting buffer ends `before` bytes into page 2 of `a`,
             * made inaccessible; the other is in `b`. */
            fill(a, 4 * page, 1);
            fill(b, 4 * page, 2);
            bad_lo = (uintptr_t)a + 2 * page;
            bad_hi = bad_lo + page;
            mprotect(a + 2 * page, page, PROT_NONE);
            unsigned char *p = a + 2 * page - before;
            unsigned char *d = src_side ? b + 100 : p;
            const unsigned char *s = src_side ? p : b + 100;
            calls++;
            if (try_call(fn, d, s, n)) {
                returned++;
                mprotect(a + 2 * page, page, PROT_READ | PROT_WRITE);
                int ok = 1;
                for (size_t k = 0; k < n; k++)
                    ok &= d[k] == (fn == MEMSET ? 0x5a : s[k]);
                whole += ok;
            }
            mprotect(a + 2 * page, page, PROT_READ | PROT_WRITE);
        }
    }
    printf("OUTCOME %s side: %d calls, %d faults, %d on the calling thread at an address "
           "in the bad page, %d returned, %d of them whole\n",
           src_side ? "source" : "destination", calls, faults, right, returned, whole);
    munmap(a, 4 * page);
    munmap(b, 4 * page);
}

/* Copies from a file mapping truncated under them: each length's source
 * ends `before` bytes into the page past the file's end. */
static void bus_calls(void)
{
    char path[] = "/tmp/bulkmem-small-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    if (fd < 0 || ftruncate(fd, (off_t)(4 * page)) != 0) {
        perror("file");
        exit(2);
    }
    unsigned char *f = mmap(NULL, 4 * page, PROT_READ, MAP_SHARED, fd, 0);
    if (f == MAP_FAILED || ftruncate(fd, (off_t)(2 * page)) != 0) {
        perror("mmap");
        exit(2);
    }
    close(fd);
    bad_lo = (uintptr_t)f + 2 * page;
    bad_hi = (uintptr_t)f + 4 * page;
    unsigned char *d = map(2 * page);
    int calls = 0, returned = 0;
    for (int fn = 0; fn < MEMSET; fn++)
        for (size_t i = 0; i < N_LENS; i++) {
            size_t n = lens[i], before = n > 80 ? 40 : n / 2;
            calls++;
            returned += try_call(fn, d, f + 2 * page - before, n);
        }
    printf("OUTCOME truncated file: %d calls, %d faults, %d on the calling thread at an "
           "address past the end, %d returned\n",
           calls, faults, right, returned);
}

int main(int argc, char **argv)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);
    caller = tid();
    alarm(60); /* watchdog: a hang dies of SIGALRM */
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "segv-longjmp") || !strcmp(c, "segv-repair")) {
        repair = !strcmp(c, "segv-repair");
        handle(SIGSEGV);
        faulting_calls(1);
        faults = right = 0;
        faulting_calls(0);
    } else if (!strcmp(c, "bus-longjmp")) {
        handle(SIGBUS);
        bus_calls();
    } else if (!strcmp(c, "crash")) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        unsigned char *a = map(2 * page);
        mprotect(a + page, page, PROT_NONE);
        p_memcpy(a + page - 40, a, 300);
        printf("OUTCOME the copy returned\n");
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
