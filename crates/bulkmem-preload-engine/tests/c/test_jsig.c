/* test_jsig.c - a JVM's signal set-up under libjsig (fake_jsig.c, or the
 * JDK's), with the preload before or after it: the "JVM" installs SIGSEGV
 * and SIGBUS handlers between JVM_begin_signal_setting and
 * JVM_end_signal_setting, makes large copies (which start the preload's
 * engine), then takes the faults a JVM takes on purpose: a null check (a
 * load from page 0), a truncated file mapping (SIGBUS), both caught and
 * left with siglongjmp, as an implicit null check or an InternalError
 * is; and a fault its handler does not own, which it chains to the
 * action libjsig saved (the default: the process dies of it). Every
 * outcome must be what it is without the preload.
 *
 *   test_jsig CASE   (null-check, truncated, unowned)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "large_calls.h"

static sigjmp_buf env;
/* A null check's load: an address in page 0 the compiler cannot see. */
static volatile int *volatile nowhere = (volatile int *)(uintptr_t)8;
static volatile sig_atomic_t caught;
static char *owned_lo, *owned_hi; /* the "Java heap": faults the JVM owns */

static void jvm_handler(int sig, siginfo_t *si, void *uc)
{
    char *a = si->si_addr;
    if (a < (char *)4096 || (a >= owned_lo && a < owned_hi)) {
        caught = sig;
        siglongjmp(env, 1);
    }
    /* Not the JVM's: chain to what libjsig saved, as HotSpot does. */
    struct sigaction *(*get)(int) =
        (struct sigaction * (*)(int)) dlsym(RTLD_DEFAULT, "JVM_get_signal_action");
    struct sigaction *prev = get ? get(sig) : NULL;
    if (prev && (prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
        prev->sa_sigaction(sig, si, uc);
        return;
    }
    if (prev && prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL); /* the default: re-executed, it kills */
}

static void jvm_start(void)
{
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "JVM_begin_signal_setting");
    void (*end)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "JVM_end_signal_setting");
    if (!begin || !end) {
        fprintf(stderr, "libjsig is not loaded\n");
        exit(3);
    }
    begin();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = jvm_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    end();
}

/* Large copies, so that the preload's engine starts (and takes stock of
 * the signal dispositions). */
static void copies(void)
{
    size_t n = 64 * MIB;
    char *s = map(n), *d = map(n);
    p_memset(s, 7, n);
    p_memcpy(d, s, n);
    printf("OUTCOME copied %d\n", d[n - 1]);
    munmap(s, n);
    munmap(d, n);
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    jvm_start();
    copies();
    if (!strcmp(c, "null-check")) {
        for (volatile int i = 0; i < 3; i++) {
            if (!sigsetjmp(env, 1))
                *nowhere = 1;
            printf("OUTCOME null check %d caught by signal %d\n", (int)i, (int)caught);
            copies();
        }
    } else if (!strcmp(c, "truncated")) {
        FILE *f = tmpfile();
        int fd = fileno(f);
        if (ftruncate(fd, 4096))
            return 2;
        char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
        owned_lo = m;
        owned_hi = m + 8192;
        if (!sigsetjmp(env, 1))
            (void)*(volatile char *)(m + 4096);
        printf("OUTCOME truncated mapping caught by signal %d\n", (int)caught);
    } else if (!strcmp(c, "unowned")) {
        char *m = map(4096);
        mprotect(m, 4096, PROT_NONE);
        *(volatile char *)(m + 100) = 1; /* not the JVM's: the default kills */
        printf("OUTCOME survived a fault nobody owns\n");
    } else {
        return 2;
    }
    return 0;
}
