/*
 * What the CUDA driver answers at the edges bulkmem's GPU backend touches:
 * calls before cuInit, without a current context, with bad sizes, ranges,
 * handles and flags, double registration, the context stack, error names,
 * and a child made by fork().
 *
 * Linked against a library named libcuda.so.1: the real driver where one is
 * installed, the test double (libcuda.c) under the tests. Each line is
 * "label result" (the CUresult as a number) or "# text" for a value that
 * describes the machine rather than the driver's semantics. The lines a real
 * driver printed are kept in tests/fixtures/cuda-probe-*.txt, and
 * tests/cuda_double.rs checks that the double prints the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_api.h"

static void say(const char *label, CUresult r) { printf("%s %d\n", label, (int)r); }

static void name_of(CUresult code) {
    const char *name = NULL, *text = NULL;
    CUresult a = cuGetErrorName(code, &name);
    CUresult b = cuGetErrorString(code, &text);
    printf("error-name-%d %d %s\n", (int)code, (int)a, name ? name : "(null)");
    printf("error-text-%d %d %s\n", (int)code, (int)b, text ? text : "(null)");
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int n = -1;
    CUdevice dev = -1;
    CUcontext ctx = NULL, popped = NULL;
    CUdeviceptr dp = 0;
    CUstream s = NULL, s2 = NULL;
    CUevent ev = NULL;

    say("count-before-init", cuDeviceGetCount(&n));
    say("init-flags-1", cuInit(1));
    say("init", cuInit(0));
    say("init-again", cuInit(0));
    say("count", cuDeviceGetCount(&n));
    say("device-past-count", cuDeviceGet(&dev, n));
    say("device-negative", cuDeviceGet(&dev, -1));
    say("device-0", cuDeviceGet(&dev, 0));
    char buf[256];
    say("name", cuDeviceGetName(buf, sizeof buf, dev));
    printf("# name %s\n", buf);
    size_t total = 0;
    say("total-mem", cuDeviceTotalMem_v2(&total, dev));
    int v = 0;
    say("attr-engines", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, dev));
    printf("# copy engines %d\n", v);
    say("attr-unknown", cuDeviceGetAttribute(&v, 100000, dev));
    say("attr-bad-device", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, n + 7));

    say("pop-empty", cuCtxPopCurrent_v2(&popped));
    say("alloc-no-context", cuMemAlloc_v2(&dp, 4096));
    say("stream-no-context", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    say("event-no-context", cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    say("release-unretained", cuDevicePrimaryCtxRelease_v2(dev));
    say("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    CUcontext ctx2 = NULL;
    say("retain-again", cuDevicePrimaryCtxRetain(&ctx2, dev));
    printf("same-context %d\n", ctx == ctx2);
    say("release-one", cuDevicePrimaryCtxRelease_v2(dev));
    say("push", cuCtxPushCurrent_v2(ctx));

    say("alloc-0", cuMemAlloc_v2(&dp, 0));
    say("alloc", cuMemAlloc_v2(&dp, 1 << 20));

    long page = sysconf(_SC_PAGESIZE);
    size_t hlen = 16 * (size_t)page;
    unsigned char *h = mmap(NULL, hlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *pageable = malloc(8192);
    if (h == MAP_FAILED || !pageable) return 2;
    memset(h, 0, hlen);
    say("register-0-bytes", cuMemHostRegister_v2(h, 0, CU_MEMHOSTREGISTER_PORTABLE));
    say("register-bad-flags", cuMemHostRegister_v2(h, 4 * page, 0x80000000u));
    say("register", cuMemHostRegister_v2(h, 4 * page, CU_MEMHOSTREGISTER_PORTABLE));
    say("register-same", cuMemHostRegister_v2(h, 4 * page, CU_MEMHOSTREGISTER_PORTABLE));
    say("register-overlap", cuMemHostRegister_v2(h + page, 4 * page, CU_MEMHOSTREGISTER_PORTABLE));
    say("register-unaligned", cuMemHostRegister_v2(h + 8 * page + 5, 100, CU_MEMHOSTREGISTER_PORTABLE));
    /* Disjoint bytes, one page: is the page taken? */
    say("register-page-mate-a", cuMemHostRegister_v2(h + 10 * page + 100, 100, CU_MEMHOSTREGISTER_PORTABLE));
    say("register-page-mate-b", cuMemHostRegister_v2(h + 10 * page + 300, 100, CU_MEMHOSTREGISTER_PORTABLE));
    say("unregister-page-mate-a", cuMemHostUnregister(h + 10 * page + 100));
    say("unregister-page-mate-b", cuMemHostUnregister(h + 10 * page + 300));
    say("unregister-inside", cuMemHostUnregister(h + page));
    say("unregister-never", cuMemHostUnregister(h + 12 * page));
    say("unregister-unaligned", cuMemHostUnregister(h + 8 * page + 5));

    say("stream-bad-flags", cuStreamCreate(&s2, 0x40));
    say("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    say("stream-2", cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    say("event-bad-flags", cuEventCreate(&ev, 0x100));
    say("event", cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    say("wait-unrecorded", cuStreamWaitEvent(s2, ev, 0));
    say("event-sync-unrecorded", cuEventSynchronize(ev));
    CUevent blocking = NULL;
    say("event-blocking", cuEventCreate(&blocking, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING));
    say("wait-bad-flags", cuStreamWaitEvent(s2, ev, 0x40));

    for (long i = 0; i < 4 * page; i++) h[i] = (unsigned char)(i * 13 + 1);
    for (int i = 0; i < 8192; i++) pageable[i] = (unsigned char)(i * 5 + 3);
    say("htod", cuMemcpyHtoDAsync_v2(dp, h, 4 * page, s));
    say("record", cuEventRecord(ev, s));
    say("wait", cuStreamWaitEvent(s2, ev, 0));
    say("dtoh", cuMemcpyDtoHAsync_v2(h + 4 * page, dp, 4 * page, s2));
    say("record-blocking", cuEventRecord(blocking, s2));
    say("event-sync-blocking", cuEventSynchronize(blocking));
    say("sync-2", cuStreamSynchronize(s2));
    printf("round-trip-exact %d\n", memcmp(h, h + 4 * page, 4 * page) == 0);
    say("htod-pageable", cuMemcpyHtoDAsync_v2(dp + 100, pageable, 8192, s));
    say("dtoh-pageable", cuMemcpyDtoHAsync_v2(pageable + 4096, dp + 100, 4096, s));
    say("sync", cuStreamSynchronize(s));
    printf("pageable-exact %d\n", memcmp(pageable, pageable + 4096, 4096) == 0);
    say("htod-0-bytes", cuMemcpyHtoDAsync_v2(dp, h, 0, s));
    say("htod-past-end", cuMemcpyHtoDAsync_v2(dp + (1 << 20) - 10, h, 20, s));
    say("dtoh-past-end", cuMemcpyDtoHAsync_v2(h, dp + (1 << 20) - 10, 20, s));
    say("sync-after-bad", cuStreamSynchronize(s));

    say("free-inside", cuMemFree_v2(dp + 4096));

    popped = NULL;
    say("pop", cuCtxPopCurrent_v2(&popped));
    printf("popped-pushed %d\n", popped == ctx);
    say("sync-no-context", cuStreamSynchronize(s));
    say("event-sync-no-context", cuEventSynchronize(ev));
    say("alloc-after-pop", cuMemAlloc_v2(&dp, 4096));
    say("push-again", cuCtxPushCurrent_v2(ctx));

    /* Each call in a child of its own: a driver that crashes there (one
     * did, in cuStreamDestroy) hides nothing else. */
    static const char *const child_calls[] = {
        "count", "init", "alloc", "stream", "sync", "htod", "pop", "retain",
        "unregister", "free", "event-sync", "event-destroy", "stream-destroy", "release",
    };
    for (int k = 0; k < (int)(sizeof child_calls / sizeof child_calls[0]); k++) {
        pid_t child = fork();
        if (child == 0) {
            alarm(20); /* a driver that hangs in the child must not hang the probe */
            int cn = -1;
            CUdeviceptr cdp = 0;
            CUstream cs = NULL;
            CUcontext cc = NULL;
            CUresult r = CUDA_SUCCESS;
            switch (k) {
            case 0: r = cuDeviceGetCount(&cn); break;
            case 1: r = cuInit(0); break;
            case 2: r = cuMemAlloc_v2(&cdp, 4096); break;
            case 3: r = cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING); break;
            case 4: r = cuStreamSynchronize(s); break;
            case 5: r = cuMemcpyHtoDAsync_v2(dp, h, 4096, s); break;
            case 6: r = cuCtxPopCurrent_v2(&cc); break;
            case 7: r = cuDevicePrimaryCtxRetain(&cc, dev); break;
            case 8: r = cuMemHostUnregister(h); break;
            case 9: r = cuMemFree_v2(dp); break;
            case 10: r = cuEventSynchronize(ev); break;
            case 11: r = cuEventDestroy_v2(ev); break;
            case 12: r = cuStreamDestroy_v2(s2); break;
            case 13: r = cuDevicePrimaryCtxRelease_v2(dev); break;
            }
            printf("child-%s %d\n", child_calls[k], (int)r);
            fflush(stdout);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            printf("child-%s died %d\n", child_calls[k],
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }

    say("event-destroy", cuEventDestroy_v2(ev));
    say("event-destroy-blocking", cuEventDestroy_v2(blocking));
    say("stream-destroy", cuStreamDestroy_v2(s2));
    say("unregister", cuMemHostUnregister(h));
    say("unregister-twice", cuMemHostUnregister(h));
    say("unregister-unaligned-range", cuMemHostUnregister(h + 8 * page + 5));
    say("free", cuMemFree_v2(dp));
    say("free-twice", cuMemFree_v2(dp));
    say("stream-destroy-last", cuStreamDestroy_v2(s));
    popped = NULL;
    say("pop-last", cuCtxPopCurrent_v2(&popped));
    say("release", cuDevicePrimaryCtxRelease_v2(dev));
    say("release-past-zero", cuDevicePrimaryCtxRelease_v2(dev));
    say("push-released", cuCtxPushCurrent_v2(ctx));
    say("alloc-in-released", cuMemAlloc_v2(&dp, 4096));
    popped = NULL;
    say("pop-released", cuCtxPopCurrent_v2(&popped));

    static const CUresult codes[] = {0, 1, 2, 3, 100, 101, 201, 214, 400, 700, 709, 712, 713, 719, 999};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) name_of(codes[i]);
    const char *p = (const char *)1;
    say("error-name-unknown", cuGetErrorName((CUresult)123456, &p));
    printf("error-name-unknown-null %d\n", p == NULL);
    return 0;
}
