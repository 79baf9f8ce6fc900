/*
 * check.h - a tiny test helper for bulkmem's C tests (C99, header only).
 *
 *   CHECK(cond)              record cond; on failure print file:line and the
 *                            expression, then keep going
 *   CHECKF(cond, fmt, ...)   as CHECK, with a printf-style note on failure
 *                            (say which case failed)
 *   CHECK_EQ_INT(a, b)       a == b as integers; prints both values on failure
 *   CHECK_EQ_SIZE(a, b)      a == b as size_t; prints both values on failure
 *   CHECK_STR_NONEMPTY(s)    s is a non-NULL, non-empty string
 *   check_note(fmt, ...)     an informational line (skips) on stdout
 *   check_finish()           prints "N passed, M failed" alone on the last
 *                            line of stdout; returns 0 if M == 0, else 1
 *
 * Failures go to stderr (unbuffered, so they survive a crash). The counters
 * are not thread-safe: call the CHECK macros from one thread only.
 */
#ifndef BULKMEM_TEST_CHECK_H
#define BULKMEM_TEST_CHECK_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__GNUC__)
#define CHECK_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#else
#define CHECK_PRINTF_(f, a)
#endif

/* Failure messages printed in full; later ones are only counted. */
#define CHECK_MAX_PRINTED 200

static int check_passed_ = 0;
static int check_failed_ = 0;

static inline int check_fail_head_(const char *file, int line, const char *what)
{
    check_failed_++;
    if (check_failed_ > CHECK_MAX_PRINTED) {
        if (check_failed_ == CHECK_MAX_PRINTED + 1)
            fprintf(stderr, "(further failures are counted, not printed)\n");
        return 0;
    }
    fflush(stdout);
    fprintf(stderr, "FAIL %s:%d: %s\n", file, line, what);
    return 1;
}

static inline int check_record_(int ok, const char *file, int line, const char *expr)
{
    if (ok) {
        check_passed_++;
        return 1;
    }
    check_fail_head_(file, line, expr);
    return 0;
}

static inline CHECK_PRINTF_(5, 6) int check_recordf_(int ok, const char *file, int line,
                                                    const char *expr, const char *fmt, ...)
{
    va_list ap;
    if (ok) {
        check_passed_++;
        return 1;
    }
    if (check_fail_head_(file, line, expr)) {
        fprintf(stderr, "    ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n");
    }
    return 0;
}

static inline int check_eq_int_(long long a, long long b, const char *file, int line,
                                const char *ea, const char *eb)
{
    if (a == b) {
        check_passed_++;
        return 1;
    }
    if (check_fail_head_(file, line, "CHECK_EQ_INT"))
        fprintf(stderr, "    %s == %s: %lld != %lld\n", ea, eb, a, b);
    return 0;
}

static inline int check_eq_size_(size_t a, size_t b, const char *file, int line,
                                 const char *ea, const char *eb)
{
    if (a == b) {
        check_passed_++;
        return 1;
    }
    if (check_fail_head_(file, line, "CHECK_EQ_SIZE"))
        fprintf(stderr, "    %s == %s: %zu != %zu\n", ea, eb, a, b);
    return 0;
}

static inline int check_str_nonempty_(const char *s, const char *file, int line, const char *e)
{
    if (s != NULL && s[0] != '\0') {
        check_passed_++;
        return 1;
    }
    if (check_fail_head_(file, line, "CHECK_STR_NONEMPTY"))
        fprintf(stderr, "    %s is %s\n", e, s == NULL ? "NULL" : "\"\"");
    return 0;
}

static inline CHECK_PRINTF_(1, 2) void check_note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static inline int check_finish(void)
{
    fflush(stderr);
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    fflush(stdout);
    return check_failed_ == 0 ? 0 : 1;
}

#define CHECK(cond) check_record_(!!(cond), __FILE__, __LINE__, #cond)
#define CHECKF(cond, ...) check_recordf_(!!(cond), __FILE__, __LINE__, #cond, __VA_ARGS__)
#define CHECK_EQ_INT(a, b) \
    check_eq_int_((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_EQ_SIZE(a, b) \
    check_eq_size_((size_t)(a), (size_t)(b), __FILE__, __LINE__, #a, #b)
#define CHECK_STR_NONEMPTY(s) check_str_nonempty_((s), __FILE__, __LINE__, #s)

#endif /* BULKMEM_TEST_CHECK_H */
