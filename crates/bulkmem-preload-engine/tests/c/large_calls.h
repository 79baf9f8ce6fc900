/* What the preload's out-of-process C tests (test_invisible.c,
 * test_crash.c, test_limits.c) share: fresh mappings, and copies made
 * through volatile function pointers, so that each is a real call of the
 * (possibly interposed) memcpy and memset, never inlined or elided. */
#ifndef LARGE_CALLS_H
#define LARGE_CALLS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

__attribute__((unused)) static void *(*volatile p_memcpy)(void *, const void *,
                                                          size_t) = memcpy;
__attribute__((unused)) static void *(*volatile p_memset)(void *, int, size_t) = memset;

/* A private anonymous mapping of `n` bytes, or exit 2. */
static inline void *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return p;
}

static inline pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

#endif
