/* A write barrier as Boehm GC's incremental mode and other collectors
 * build one: pages protected, and a SIGSEGV handler that unprotects the
 * page written. Under the preload, each fault must reach the handler as
 * it would without it: no system call of the preload's on the way (the
 * suite counts them with strace). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGES 4096

static size_t page;
static volatile sig_atomic_t faults;

static void barrier(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)ctx;
    uintptr_t at = (uintptr_t)si->si_addr & ~(uintptr_t)(page - 1);
    mprotect((void *)at, page, PROT_READ | PROT_WRITE);
    faults++;
}

int main(void)
{
    page = (size_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = barrier;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0)
        return 2;
    /* A large copy first: the preload's engine is open from here on. */
    size_t big = 8u << 20;
    char *a = malloc(big), *b = malloc(big);
    if (!a || !b)
        return 2;
    memset(a, 1, big);
    memcpy(b, a, big);
    char *heap = mmap(NULL, PAGES * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (heap == MAP_FAILED)
        return 2;
    for (size_t i = 0; i < PAGES; i++)
        heap[i * page] = (char)i;
    printf("OUTCOME faults %d copy %d\n", (int)faults, b[big - 1]);
    return faults == PAGES ? 0 : 1;
}
