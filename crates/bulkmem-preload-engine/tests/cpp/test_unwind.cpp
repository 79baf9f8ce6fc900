// test_unwind.cpp - unwinding through a large memcpy, with and without
// libbulkmem_preload.so (preload_suite.rs runs each case in its own
// process several times both ways and requires the same outcome). Built
// with -fnon-call-exceptions so that a fault can become an exception.
//
//   test_unwind CASE
//
//   throw-from-segv    the SIGSEGV handler throws; main catches it
//   exit-from-segv     the SIGSEGV handler calls pthread_exit on a thread
//   throw-from-segv-small, exit-from-segv-small
//                      the same from copies of 7 to 4096 bytes (which the
//                      preload does in the interposed function itself)
//   async-cancel       a thread in a loop of 64 MiB copies, cancelled
//                      asynchronously
//   forced-unwind      many async cancels, each at a different moment of a
//                      copy (every one must unwind cleanly)
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <stdexcept>

static void *(*volatile p_memcpy)(void *, const void *, size_t) = memcpy;
static const size_t MIB = size_t(1) << 20;

struct Fault : std::runtime_error {
    explicit Fault(uintptr_t a) : std::runtime_error("fault"), addr(a) {}
    uintptr_t addr;
};

static unsigned char *map(size_t n)
{
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    return static_cast<unsigned char *>(p);
}

static void on_segv_throw(int, siginfo_t *si, void *) { throw Fault(uintptr_t(si->si_addr)); }
static void on_segv_exit(int, siginfo_t *, void *) { pthread_exit(reinterpret_cast<void *>(7)); }

static void handle(void (*h)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = h;
    // SA_NODEFER: the handler leaves by unwinding, never through
    // sigreturn, so the signal must not stay blocked after it.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
}

// A 64 MiB source with one PROT_NONE page at 40 MiB.
static unsigned char *bad_source(uintptr_t *bad)
{
    size_t n = 64 * MIB;
    unsigned char *src = map(n);
    for (size_t i = 0; i < n; i += 4096)
        src[i] = 1;
    mprotect(src + 40 * MIB, 4096, PROT_NONE);
    *bad = uintptr_t(src) + 40 * MIB;
    return src;
}

static void case_throw()
{
    uintptr_t bad;
    unsigned char *src = bad_source(&bad), *dst = map(64 * MIB);
    handle(on_segv_throw);
    try {
        p_memcpy(dst, src, 64 * MIB);
        printf("OUTCOME the copy returned\n");
    } catch (const Fault &f) {
        printf("OUTCOME caught the exception thrown by the handler, address in the bad page: %s\n",
               f.addr >= bad && f.addr < bad + 4096 ? "yes" : "no");
    }
    // And again: the process is still sound.
    try {
        p_memcpy(dst, src, 64 * MIB);
    } catch (const Fault &) {
        printf("OUTCOME caught it again\n");
    }
}

// Small copies whose source runs into a PROT_NONE page, each caught.
static const size_t small_lens[] = {7, 33, 300, 512, 1000, 4096};

static void case_throw_small()
{
    unsigned char *a = map(3 * 4096), *dst = map(2 * 4096);
    mprotect(a + 2 * 4096, 4096, PROT_NONE);
    uintptr_t bad = uintptr_t(a) + 2 * 4096;
    handle(on_segv_throw);
    int caught = 0, in_page = 0;
    for (size_t n : small_lens) {
        try {
            p_memcpy(dst, a + 2 * 4096 - n / 2, n);
        } catch (const Fault &f) {
            caught++;
            in_page += f.addr >= bad && f.addr < bad + 4096;
        }
    }
    printf("OUTCOME %d of %zu small copies threw from the handler, %d with the address in "
           "the bad page\n",
           caught, sizeof small_lens / sizeof small_lens[0], in_page);
}

static void *copy_bad_small(void *)
{
    unsigned char *a = map(3 * 4096), *dst = map(2 * 4096);
    mprotect(a + 2 * 4096, 4096, PROT_NONE);
    p_memcpy(dst, a + 2 * 4096 - 100, 300);
    return nullptr;
}

static void *copy_bad(void *)
{
    uintptr_t bad;
    unsigned char *src = bad_source(&bad), *dst = map(64 * MIB);
    p_memcpy(dst, src, 64 * MIB);
    return nullptr;
}

static void case_exit(void *(*copy)(void *))
{
    handle(on_segv_exit);
    pthread_t t;
    pthread_create(&t, nullptr, copy, nullptr);
    void *ret = nullptr;
    pthread_join(t, &ret);
    printf("OUTCOME joined the thread that left with pthread_exit: %ld\n", long(reinterpret_cast<intptr_t>(ret)));
}

static unsigned char *csrc, *cdst;
static volatile int started;

static void *copy_forever(void *)
{
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
    for (;;) {
        started = 1;
        p_memcpy(cdst, csrc, 64 * MIB);
    }
    return nullptr;
}

static int cancel_once(long delay_us)
{
    started = 0;
    pthread_t t;
    pthread_create(&t, nullptr, copy_forever, nullptr);
    while (!started)
        sched_yield();
    struct timespec d = {0, delay_us * 1000};
    nanosleep(&d, nullptr);
    pthread_cancel(t);
    void *ret = nullptr;
    pthread_join(t, &ret);
    return ret == PTHREAD_CANCELED;
}

static void case_cancel()
{
    csrc = map(64 * MIB);
    cdst = map(64 * MIB);
    memset(csrc, 3, 64 * MIB);
    printf("OUTCOME cancelled asynchronously in a copy and joined: %s\n", cancel_once(20000) ? "yes" : "no");
}

static void case_forced()
{
    csrc = map(64 * MIB);
    cdst = map(64 * MIB);
    memset(csrc, 3, 64 * MIB);
    int ok = 0, n = 40;
    for (int i = 0; i < n; i++)
        ok += cancel_once(300 + 997 * i % 9000);
    printf("OUTCOME %d of %d asynchronous cancels unwound cleanly\n", ok, n);
    // The process still copies correctly afterwards.
    p_memcpy(cdst, csrc, 64 * MIB);
    printf("OUTCOME a copy afterwards is right: %s\n", memcmp(cdst, csrc, 64 * MIB) == 0 ? "yes" : "no");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    alarm(60);
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "throw-from-segv"))
        case_throw();
    else if (!strcmp(c, "exit-from-segv"))
        case_exit(copy_bad);
    else if (!strcmp(c, "throw-from-segv-small"))
        case_throw_small();
    else if (!strcmp(c, "exit-from-segv-small"))
        case_exit(copy_bad_small);
    else if (!strcmp(c, "async-cancel"))
        case_cancel();
    else if (!strcmp(c, "forced-unwind"))
        case_forced();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    return 0;
}
