/* test_semantics.c - results of every function libbulkmem_preload.so
 * interposes (memcpy, memmove, memset, mempcpy, __memcpy_chk,
 * __memmove_chk, __memset_chk), checked byte for byte against reference
 * loops, with canary bytes on both sides of every destination.
 *
 * Run it under the preload (set BULKMEM_PRELOAD_MIN=0 to send every call
 * through the accelerated path) or, with BULKMEM_TEST_EXPECT_NO_PRELOAD set,
 * against plain glibc.
 *
 * The functions under test are called through volatile function pointers,
 * so the compiler can neither inline nor constant-fold them: every call is a
 * real call of the symbol the dynamic linker bound. The reference loops work
 * on volatile bytes and are compiled without loop-to-library-call pattern
 * recognition, so they never become memcpy/memset calls themselves. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "preload_check.h"
#include "bulkmem_preload_state.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* Canary bytes on each side of a destination. */
#define CAN 64
/* Misalignments tried: 0 .. MIS-1. */
#define MIS 64
/* The byte the copy tests put in canaries; pat() never yields it. */
#define CANARY_BYTE 0xFF

typedef unsigned char uchar;
typedef volatile unsigned char vuchar;

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

/* Reference loops: never turned back into library calls. */
#if defined(__GNUC__) && !defined(__clang__)
#define REF_FN __attribute__((noinline, optimize("no-tree-loop-distribute-patterns")))
#elif defined(__GNUC__)
#define REF_FN __attribute__((noinline))
#else
#define REF_FN
#endif

/* Byte i of pattern `seed`: position dependent (a shifted copy shows up) and
 * never CANARY_BYTE. */
static inline uchar pat(uint32_t seed, size_t i)
{
    uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (seed * 0x85EBCA77u + (uint32_t)(i >> 32));
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    uchar b = (uchar)h;
    return b == CANARY_BYTE ? (uchar)(CANARY_BYTE - 1) : b;
}

REF_FN static void ref_fill(vuchar *p, size_t n, uint32_t seed, size_t base)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, base + i);
}

REF_FN static void ref_set(vuchar *p, uchar v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

/* Non-overlapping copy. */
REF_FN static void ref_copy(vuchar *d, const vuchar *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* Overlap-safe copy. */
REF_FN static void ref_move(vuchar *d, const vuchar *s, size_t n)
{
    if ((uintptr_t)d <= (uintptr_t)s) {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        for (size_t i = n; i > 0; i--)
            d[i - 1] = s[i - 1];
    }
}

/* First index where a and b differ, or n. */
REF_FN static size_t ref_diff(const vuchar *a, const vuchar *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return n;
}

/* First index whose byte is not v, or n. */
REF_FN static size_t ref_find_not(const vuchar *p, uchar v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return i;
    return n;
}

/* First index that is not pattern `seed` from base, or n. */
REF_FN static size_t ref_find_not_pat(const vuchar *p, size_t n, uint32_t seed, size_t base)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, base + i))
            return i;
    return n;
}


/* --- the calls under test -------------------------------------------------- */

enum { K_MEMCPY, K_MEMMOVE, K_MEMPCPY, K_MEMCPY_CHK, K_MEMMOVE_CHK, K_COUNT };
static const char *const kind_name[K_COUNT] = {"memcpy", "memmove", "mempcpy", "__memcpy_chk",
                                               "__memmove_chk"};

/* The _chk calls cycle through these destination lengths (all >= len). */
static unsigned chk_turn = 0;
static size_t chk_destlen(size_t n)
{
    switch (chk_turn++ % 4) {
    case 0: return n;
    case 1: return n + 1;
    case 2: return n + 4096;
    default: return (size_t)-1;
    }
}

/* Calls kind k; *want gets the return value the function must give. */
static void *do_copy(int k, void *d, const void *s, size_t n, void **want)
{
    *want = d;
    switch (k) {
    case K_MEMCPY: return p_memcpy(d, s, n);
    case K_MEMMOVE: return p_memmove(d, s, n);
    case K_MEMPCPY: *want = (uchar *)d + n; return p_mempcpy(d, s, n);
    case K_MEMCPY_CHK: return p_memcpy_chk(d, s, n, chk_destlen(n));
    case K_MEMMOVE_CHK: return p_memmove_chk(d, s, n, chk_destlen(n));
    }
    return NULL;
}

static void *do_set(int chk, void *d, int c, size_t n)
{
    if (chk)
        return p_memset_chk(d, c, n, chk_destlen(n));
    return p_memset(d, c, n);
}

/* "ok" or "WRONG at byte i" (for failure messages). */
static const char *at(char *buf, size_t bufsz, size_t i, size_t n)
{
    if (i == n)
        return "ok";
    snprintf(buf, bufsz, "WRONG at byte %zu", i);
    return buf;
}

/* --- checkers ------------------------------------------------------------------ */

/* One non-overlapping copy of n bytes from sbase+sa into dbase+CAN+da.
 * sbase holds pattern 1 (never CANARY_BYTE); dbase needs n+da+2*CAN bytes. */
static void copy_case(int k, uchar *dbase, const uchar *sbase, size_t n, size_t da, size_t sa)
{
    uchar *dst = dbase + CAN + da;
    const uchar *src = sbase + sa;
    void *want, *ret;
    size_t pre, mid, post;

    ref_set(dst - CAN, CANARY_BYTE, n + 2 * CAN);
    ret = do_copy(k, dst, src, n, &want);
    pre = ref_find_not(dst - CAN, CANARY_BYTE, CAN);
    mid = ref_diff(dst, src, n);
    post = ref_find_not(dst + n, CANARY_BYTE, CAN);
    {
        char b1[48], b2[48], b3[48];
        CHECKF(ret == want && pre == CAN && mid == n && post == CAN,
               "%s n=%zu dst_mis=%zu src_mis=%zu: return value %s; canary before %s; "
               "data %s; canary after %s",
               kind_name[k], n, da, sa, ret == want ? "ok" : "WRONG",
               at(b1, sizeof b1, pre, CAN), at(b2, sizeof b2, mid, n),
               at(b3, sizeof b3, post, CAN));
    }
}

/* One memmove-like call inside one buffer: region at mb+mis of
 * n + 2*margin + 2*CAN bytes, src at CAN+margin into it, dst = src+shift
 * (|shift| <= margin). The whole region is compared with the same move done
 * by ref_move on a copy at rb+mis. */
static void move_case(int k, uchar *mb, uchar *rb, size_t n, long shift, size_t margin, size_t mis,
                      uint32_t seed)
{
    size_t total = n + 2 * margin + 2 * CAN;
    uchar *reg = mb + mis, *rreg = rb + mis;
    uchar *src = reg + CAN + margin, *dst = src + shift;
    void *want, *ret;
    size_t bad;

    ref_fill(reg, total, seed, 0);
    ref_copy(rreg, reg, total);
    ref_move(rreg + CAN + margin + shift, rreg + CAN + margin, n);
    ret = do_copy(k, dst, src, n, &want);
    bad = ref_diff(reg, rreg, total);
    {
        char b1[64] = "none";
        if (bad != total)
            snprintf(b1, sizeof b1, "at dst%+ld (dst+n is dst%+ld)",
                     (long)bad - (long)(CAN + margin) - shift, (long)n);
        CHECKF(ret == want && bad == total,
               "%s n=%zu shift=%ld mis=%zu: return value %s; wrong bytes: first %s",
               kind_name[k], n, shift, mis, ret == want ? "ok" : "WRONG", b1);
    }
}

/* One memset of n bytes at dbase+CAN+da; canaries differ from the value. */
static void set_case(int chk, uchar *dbase, size_t n, size_t da, int c)
{
    uchar *dst = dbase + CAN + da;
    uchar v = (uchar)c, canary = (uchar)(v ^ 0xA5);
    void *ret;
    size_t pre, mid, post;

    ref_set(dst - CAN, canary, n + 2 * CAN);
    ret = do_set(chk, dst, c, n);
    pre = ref_find_not(dst - CAN, canary, CAN);
    mid = ref_find_not(dst, v, n);
    post = ref_find_not(dst + n, canary, CAN);
    {
        char b1[48], b2[48], b3[48];
        CHECKF(ret == dst && pre == CAN && mid == n && post == CAN,
               "%s c=%d n=%zu dst_mis=%zu: return value %s; canary before %s; data %s; "
               "canary after %s",
               chk ? "__memset_chk" : "memset", c, n, da, ret == dst ? "ok" : "WRONG",
               at(b1, sizeof b1, pre, CAN), at(b2, sizeof b2, mid, n),
               at(b3, sizeof b3, post, CAN));
    }
}

/* --- sizes --------------------------------------------------------------------- */

static const size_t big_sizes[] = {
    64 * KIB - 1, 64 * KIB, 64 * KIB + 1, 64 * KIB + 63,
    1 * MIB - 1,  1 * MIB,  1 * MIB + 1,  1 * MIB + 4095,
    2 * MIB - 1,  2 * MIB,  2 * MIB + 1,  2 * MIB + 65,
    4 * MIB - 1,  4 * MIB,  4 * MIB + 1,  4 * MIB + 4097,
};
#define N_BIG (sizeof big_sizes / sizeof big_sizes[0])
/* One more, large enough to reach a multi-threaded engine at usual
 * thresholds (BULKMEM_PRELOAD_MT_MIN can lower the threshold). */
#define XL_SIZE (16 * MIB + 7)

/* (dst misalignment, src misalignment) pairs for the larger lengths. */
static const size_t few_mis[][2] = {{0, 0}, {1, 0}, {0, 1}, {63, 63}, {13, 50}, {32, 7}};
#define N_FEW (sizeof few_mis / sizeof few_mis[0])

#define SMALL_MAX 4200
#define GRID_MAX 300 /* full misalignment grid below this length */
#define SMALL_BUF (SMALL_MAX + MIS + 2 * CAN + 4096)
#define BIG_BUF (XL_SIZE + MIS + 2 * CAN + 4096)

/* --- sections ------------------------------------------------------------------ */


/* Plain copies (memcpy, mempcpy, the _chk copies, non-overlapping memmove)
 * over lengths 0..SMALL_MAX and the big sizes. `grid`: the full 64x64
 * misalignment grid below GRID_MAX (memcpy only; the others take a sample). */
static void copy_section(int k, int grid, uchar *sd, uchar *ss, uchar *bd, uchar *bs)
{
    double t0 = now_s();
    int before = check_failed_;
    for (size_t n = 0; n <= SMALL_MAX; n++) {
        if (n < GRID_MAX && grid) {
            for (size_t da = 0; da < MIS; da++)
                for (size_t sa = 0; sa < MIS; sa++)
                    copy_case(k, sd, ss, n, da, sa);
        } else if (n < GRID_MAX || grid) {
            /* every length, a few misalignment pairs (one varying with n) */
            for (size_t i = 0; i < 3; i++)
                copy_case(k, sd, ss, n, few_mis[(n + i) % N_FEW][0], few_mis[(n + i) % N_FEW][1]);
            copy_case(k, sd, ss, n, (n * 7) % MIS, (n * 13 + 5) % MIS);
        } else if (n % 7 == 0 || n % 64 == 63 || n % 64 == 0 || n % 64 == 1) {
            copy_case(k, sd, ss, n, few_mis[n % N_FEW][0], few_mis[n % N_FEW][1]);
            copy_case(k, sd, ss, n, (n * 7) % MIS, (n * 13 + 5) % MIS);
        }
    }
    for (size_t b = 0; b < N_BIG; b++) {
        size_t pairs = grid ? N_FEW : 2;
        for (size_t i = 0; i < pairs; i++) {
            size_t j = grid ? i : (b + i) % N_FEW;
            copy_case(k, bd, bs, big_sizes[b], few_mis[j][0], few_mis[j][1]);
        }
    }
    copy_case(k, bd, bs, XL_SIZE, 0, 0);
    copy_case(k, bd, bs, XL_SIZE, 5, 11);
    /* the sources are never written */
    CHECKF(ref_find_not_pat(ss, SMALL_BUF, 1, 0) == SMALL_BUF, "%s wrote into its source",
           kind_name[k]);
    CHECKF(ref_find_not_pat(bs, BIG_BUF, 2, 0) == BIG_BUF, "%s wrote into its source",
           kind_name[k]);
    check_note("note: %-14s lengths 0..%d%s, %zu big sizes 64K..4M+4097, 16M+7: %d failures "
               "(%.2f s)",
               kind_name[k], SMALL_MAX,
               grid ? ", full 64x64 misalignment grid below 300" : ", sampled misalignments",
               N_BIG, check_failed_ - before, now_s() - t0);
}

/* Overlapping moves (memmove or __memmove_chk). `full`: the whole plan,
 * otherwise a sample. */
static void move_section(int k, int full)
{
    double t0 = now_s();
    int before = check_failed_;
    const size_t margin = 130;
    size_t sbufsz = 2100 + 2 * margin + 2 * CAN + MIS + 4096;
    uchar *mb = alloc_buf(sbufsz), *rb = alloc_buf(sbufsz);
    uint32_t seed = 100;
    long step_shift = full ? 1 : 7;
    size_t cases = 0;

    for (size_t n = 0; n <= 2100;) {
        for (long sh = -130; sh <= 130; sh += step_shift) {
            size_t mis = ((size_t)n * 5 + (size_t)(sh + 130) * 3) % MIS;
            move_case(k, mb, rb, n, sh, margin, mis, seed++);
            cases++;
        }
        if (n < 300)
            n++;
        else if (n < 2100 && n + 37 > 2100)
            n = 2100;
        else
            n += 37;
    }
    free(mb);
    free(rb);

    /* large overlapping moves */
    {
        static const long big_shift[] = {1, -1, 4096, -4096, 2 * (long)MIB, -2 * (long)MIB};
        size_t n = 4 * MIB, bmargin = 2 * MIB;
        size_t bsz = n + 2 * bmargin + 2 * CAN + MIS + 4096;
        mb = alloc_buf(bsz);
        rb = alloc_buf(bsz);
        for (size_t i = 0; i < sizeof big_shift / sizeof big_shift[0]; i++) {
            if (!full && i >= 2)
                break;
            move_case(k, mb, rb, n, big_shift[i], bmargin, i % 2 ? 3 : 0, seed++);
            cases++;
        }
        free(mb);
        free(rb);
    }
    if (full) {
        /* multi-threaded-engine sized overlapping moves */
        static const long xl_shift[] = {1, -1, 4097, -4097};
        size_t n = XL_SIZE, xmargin = 4097;
        size_t bsz = n + 2 * xmargin + 2 * CAN + MIS + 4096;
        mb = alloc_buf(bsz);
        rb = alloc_buf(bsz);
        for (size_t i = 0; i < sizeof xl_shift / sizeof xl_shift[0]; i++) {
            move_case(k, mb, rb, n, xl_shift[i], xmargin, 1, seed++);
            cases++;
        }
        free(mb);
        free(rb);
    }
    check_note("note: %-14s overlapping: lengths 0..2100, shifts -130..130%s, %s: %zu cases, "
               "%d failures (%.2f s)",
               kind_name[k], full ? "" : " step 7",
               full ? "4M with shifts +-1/+-4096/+-2M, 16M+7 with shifts +-1/+-4097"
                    : "4M with shifts +-1",
               cases, check_failed_ - before, now_s() - t0);
}

static void set_section(int chk, uchar *sd, uchar *bd)
{
    static const int vals[] = {0, 0x5a, 0xff, 1};
    double t0 = now_s();
    int before = check_failed_;
    size_t nv = chk ? 2 : 4;

    for (size_t vi = 0; vi < nv; vi++) {
        int c = vals[chk ? vi + 1 : vi]; /* __memset_chk: 0x5a, 0xff */
        for (size_t n = 0; n <= SMALL_MAX; n++) {
            if (n < GRID_MAX && !chk) {
                for (size_t da = 0; da < MIS; da++)
                    set_case(chk, sd, n, da, c);
            } else if (n < GRID_MAX || !chk || n % 5 == 0) {
                set_case(chk, sd, n, 0, c);
                set_case(chk, sd, n, (n * 7 + vi) % MIS, c);
                set_case(chk, sd, n, MIS - 1 - (n * 3 % MIS), c);
            }
        }
        for (size_t b = 0; b < N_BIG; b++)
            set_case(chk, bd, big_sizes[b], (b * 11 + vi) % MIS, c);
        set_case(chk, bd, 8 * MIB + 13, 0, c);
        set_case(chk, bd, 8 * MIB + 13, 5, c);
        set_case(chk, bd, XL_SIZE, 3, c);
    }
    /* the value is converted to unsigned char */
    {
        static const int odd[] = {0x15a, -1, 0x100, -256 + 0x12, 0x7fffff01};
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            set_case(chk, sd, 100, 3, odd[i]);
            set_case(chk, sd, 4000, 0, odd[i]);
            set_case(chk, bd, 2 * MIB + 1, 1, odd[i]);
        }
    }
    check_note("note: %-14s values %s, lengths 0..%d%s, big sizes, 8M+13, 16M+7, "
               "int values beyond a byte: %d failures (%.2f s)",
               chk ? "__memset_chk" : "memset", chk ? "0x5a/0xff" : "0/0x5a/0xff/1", SMALL_MAX,
               chk ? " (sampled)" : ", all 64 misalignments below 300", check_failed_ - before,
               now_s() - t0);
}

/* The lengths the two sections below try: every one up to 700, then
 * every 13th and the edges of the preload's small path (512 bytes in
 * registers, a loop of 128-byte blocks up to 4096) and of glibc's
 * (rep movsb from 2112 on some CPUs). */
static size_t next_len(size_t n)
{
    static const size_t edges[] = {1023, 1024, 1025, 2047, 2048, 2049, 2111, 2112,
                                   2113, 4031, 4095, 4096, 4097, 4224};
    if (n < 700)
        return n + 1;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (edges[i] > n && edges[i] < n + 13)
            return edges[i];
    return n + 13;
}
#define LEN_MAX 4224

/* Calls up to and past the preload's small path with each buffer flush
 * against a PROT_NONE page, after it and before it: a load or store
 * outside [p, p+n) faults and the test dies. Every kind, memset and
 * __memset_chk. */
static void guard_section(void)
{
    int before = check_failed_;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    /* guard | src area | guard | dst area | guard */
    size_t area = (LEN_MAX + pg - 1) / pg * pg;
    size_t total = 3 * pg + 2 * area;
    uchar *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    uchar *src = m + pg, *dst = src + area + pg;
    if (mprotect(m, pg, PROT_NONE) || mprotect(src + area, pg, PROT_NONE) ||
        mprotect(dst + area, pg, PROT_NONE)) {
        perror("mprotect");
        exit(2);
    }
    ref_fill(src, area, 9, 0);
    for (size_t n = 0; n <= LEN_MAX; n = next_len(n)) {
        /* (dst, src) at the start of their areas, then at their ends */
        uchar *ds[2] = {dst, dst + area - n}, *ss[2] = {src, src + area - n};
        for (int e = 0; e < 4; e++) {
            uchar *d = ds[e & 1];
            const uchar *sp = ss[e >> 1];
            for (int k = 0; k < K_COUNT; k++) {
                void *want, *ret = do_copy(k, d, sp, n, &want);
                CHECKF(ret == want && ref_diff(d, sp, n) == n,
                       "%s n=%zu beside guard pages (%s dst, %s src): wrong", kind_name[k], n,
                       e & 1 ? "end" : "start", e >> 1 ? "end" : "start");
            }
            for (int chk = 0; chk < 2; chk++) {
                void *ret = do_set(chk, d, 0x3c + chk, n);
                CHECKF(ret == d && ref_find_not(d, (uchar)(0x3c + chk), n) == n,
                       "%s n=%zu beside guard pages: wrong", chk ? "__memset_chk" : "memset", n);
            }
        }
    }
    munmap(m, total);
    check_note("note: guard pages on both sides, lengths 0..%d, every kind: %d failures", LEN_MAX,
               check_failed_ - before);
}

/* Overlapping calls at every distance that matters to the small path
 * (within a register, a 128-byte block, the whole length), both ways, up
 * to LEN_MAX; memcpy, mempcpy and __memcpy_chk too, which in glibc are
 * its memmove, and programs rely on it. Skipped where
 * BULKMEM_PRELOAD_MIN sends small calls to bulkmem's engine, whose
 * memcpy, like the standard's, promises nothing for overlap. */
static void overlapping_copy_section(void)
{
    if (getenv("BULKMEM_PRELOAD_MIN") != NULL)
        return;
    int before = check_failed_;
    size_t bufsz = 3 * LEN_MAX + 2 * CAN + MIS + 4096;
    uchar *mb = alloc_buf(bufsz), *rb = alloc_buf(bufsz);
    uint32_t seed = 5000;
    size_t cases = 0;
    for (size_t n = 0; n <= LEN_MAX; n = next_len(n)) {
        const size_t shifts[] = {1, 2, 31, 32, 33, 64, 127, 128, 129, 200, n / 2, n - 1, n, n + 1};
        for (int k = 0; k < K_COUNT; k++) {
            if (n > 700 && k != K_MEMCPY && k != K_MEMMOVE)
                continue;
            for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
                if (shifts[i] == 0 || shifts[i] > n + 1)
                    continue;
                for (int sign = -1; sign <= 1; sign += 2) {
                    move_case(k, mb, rb, n, sign * (long)shifts[i], n + 1,
                              (n * 3 + i) % MIS, seed++);
                    cases++;
                }
            }
        }
    }
    free(mb);
    free(rb);
    check_note("note: overlapping calls of every kind, lengths 0..%d, shifts within a "
               "register, a block and the length, both ways: %zu cases, %d failures",
               LEN_MAX, cases, check_failed_ - before);
}

/* Whether the preload's small path is on as it should be: for every
 * function where the CPU has AVX2 and the defaults hold; for none where
 * every call is counted (BULKMEM_PRELOAD_STATS=1), sent to the engine
 * (BULKMEM_PRELOAD_MIN=0) or the preload is off. */
static void small_path_section(void)
{
    struct bulkmem_preload_state state;
    int present = bulkmem_preload_state_of(&state);
    if (getenv("BULKMEM_TEST_EXPECT_NO_PRELOAD") != NULL)
        return;
    CHECKF(present, "bulkmem_preload_state not defined");
    if (!present)
        return;
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "bulkmem_preload_active");
    const char *mn = getenv("BULKMEM_PRELOAD_MIN"), *st = getenv("BULKMEM_PRELOAD_STATS");
    /* Switched off (BULKMEM_PRELOAD=off), the preload is inert: no small
     * path either. */
    int defaults = mn == NULL && (st == NULL || strcmp(st, "1") != 0) && active && active();
    int want = defaults && __builtin_cpu_supports("avx2");
    int zero_min = mn != NULL && strcmp(mn, "0") == 0, off = active && !active();
    for (int call = 0; call < 7; call++) {
        int on = (int)(state.small_paths >> call & 1);
        if (defaults || zero_min || off)
            CHECKF(on == want, "small path of call %d: %d, expected %d", call, on, want);
    }
    CHECKF(state.small_paths >> 7 == 0, "small paths of calls that do not exist: %#llx",
           (unsigned long long)state.small_paths);
    check_note("note: the preload's small path is %s", state.small_paths & 1 ? "on" : "off");
}

/* Calls real programs make that the standard leaves undefined or that look
 * odd, but that glibc handles and compilers emit: zero lengths with NULL
 * pointers, and memcpy onto itself (GCC emits memcpy for struct
 * self-assignment). */
static void edge_section(uchar *sd, uchar *bd)
{
    int before = check_failed_;
    void *want;
    static const size_t self_sizes[] = {0, 1, 7, 64, 255, 4096, 64 * KIB + 3, 4 * MIB + 1};

    CHECK(p_memcpy(NULL, NULL, 0) == NULL);
    CHECK(p_memmove(NULL, NULL, 0) == NULL);
    CHECK(p_memset(NULL, 0x5a, 0) == NULL);
    CHECK(p_mempcpy(NULL, NULL, 0) == NULL);
    CHECK(p_memcpy_chk(NULL, NULL, 0, 0) == NULL);
    CHECK(p_memmove_chk(NULL, NULL, 0, 0) == NULL);
    CHECK(p_memset_chk(NULL, 0, 0, 0) == NULL);
    /* zero length with valid pointers writes nothing */
    for (int k = 0; k < K_COUNT; k++) {
        ref_set(sd, CANARY_BYTE, 2 * CAN);
        CHECK(do_copy(k, sd + CAN, bd, 0, &want) == want && want == sd + CAN);
        CHECKF(ref_find_not(sd, CANARY_BYTE, 2 * CAN) == 2 * CAN, "%s with n=0 wrote",
               kind_name[k]);
    }
    /* dst == src */
    for (int k = 0; k < K_COUNT; k++) {
        for (size_t i = 0; i < sizeof self_sizes / sizeof self_sizes[0]; i++) {
            size_t n = self_sizes[i];
            uchar *p = bd + 3;
            ref_fill(p, n, 77, 0);
            CHECKF(do_copy(k, p, p, n, &want) == want && ref_find_not_pat(p, n, 77, 0) == n,
                   "%s with dst == src, n=%zu", kind_name[k], n);
        }
    }
    check_note("note: edge cases (NULL with n=0, n=0, dst == src): %d failures",
               check_failed_ - before);
}

int main(void)
{
    double t0 = now_s();
    uchar *sd = alloc_buf(SMALL_BUF), *ss = alloc_buf(SMALL_BUF);
    uchar *bd = alloc_buf(BIG_BUF), *bs = alloc_buf(BIG_BUF);

    check_preload_presence();

    /* sources: pattern 1 (small), pattern 2 (big); never CANARY_BYTE */
    ref_fill(ss, SMALL_BUF, 1, 0);
    ref_fill(bs, BIG_BUF, 2, 0);

    /* (a) memcpy */
    copy_section(K_MEMCPY, 1, sd, ss, bd, bs);
    /* (b) memmove: overlapping, then non-overlapping */
    move_section(K_MEMMOVE, 1);
    copy_section(K_MEMMOVE, 0, sd, ss, bd, bs);
    /* (c) memset */
    set_section(0, sd, bd);
    /* (d) mempcpy */
    copy_section(K_MEMPCPY, 0, sd, ss, bd, bs);
    /* (e) the _chk variants with destlen >= len */
    copy_section(K_MEMCPY_CHK, 0, sd, ss, bd, bs);
    copy_section(K_MEMMOVE_CHK, 0, sd, ss, bd, bs);
    move_section(K_MEMMOVE_CHK, 0);
    set_section(1, sd, bd);

    edge_section(sd, bd);
    guard_section();
    overlapping_copy_section();
    small_path_section();

    free(sd);
    free(ss);
    free(bd);
    free(bs);
    check_note("note: total %.2f s", now_s() - t0);
    return check_finish();
}
