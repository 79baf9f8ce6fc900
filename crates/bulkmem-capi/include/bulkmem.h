/*
 * bulkmem.h - the C interface of bulkmem: copy, clear, fill and move large
 * runs of memory at the speed of the hardware, with the CPU primitive chosen
 * per machine and size.
 *
 * Link with `pkg-config --cflags --libs bulkmem` (or --static).
 *
 * Conventions
 * - Errors, one rule for every function:
 *     constructors (bm_engine_new*, bm_mover_new) return NULL and set errno
 *     to the positive code; they leave errno alone on success;
 *     functions returning int return 0 (or a count) on success and the
 *     negative errno on failure, and leave errno alone either way;
 *     void functions and getters (bm_version, bm_strategy_name, ...)
 *     cannot fail.
 *   Every failure also sets bm_last_error(). New functions follow the rule.
 * - Functions returning int return 0 on success or a negative errno:
 *     -EINVAL     a NULL pointer where memory is needed, an unknown strategy
 *                 or hint, overlapping or malformed extents, bad options;
 *     -ENOTSUP    a strategy (or userfaultfd feature) this CPU/kernel lacks;
 *     -ENOMEM     not enough memory;
 *     -EIO        a checked copy stopped at a bad page (-EHWPOISON when the
 *                 signal says hardware poison, -EFAULT at an unmapped or
 *                 protected page);
 *     -ECANCELED  an engine batch stopped by its cancel flag;
 *     -EAGAIN     a thread could not be started (RLIMIT_NPROC, memory);
 *     -EBUSY      an engine held by a stalled call on another thread;
 *     -ENOTRECOVERABLE  an internal error (a bug): nothing unwinds into C;
 *   others are the errno of a failed system call.
 *   bm_strerror() names a code; bm_last_error() gives the calling thread's
 *   last failure in words ("extent 3 overlaps extent 1 ...").
 *   An internal panic is caught and reported this way; bulkmem prints
 *   nothing for it (it installs, once, a panic hook that is silent only
 *   for panics inside bm_* calls and forwards all others to the hook that
 *   was there before).
 * - A length of 0 is always valid and does nothing (pointers may be NULL);
 *   handles (engine, mover) and other arguments are still checked.
 * - Copies never overlap: dst and src must be disjoint (this is memcpy, not
 *   memmove), and in a batch no destination may overlap another extent.
 * - Strategy names are bulkmem's ("auto", "per-page", "rep-movsb",
 *   "avx2-nt", "clzero", ...); bm_strategy_name() lists them. They are
 *   read as the command line and BULKMEM_STRATEGY read them: case,
 *   surrounding spaces and '_' for '-' do not matter ("AVX2_NT" is
 *   "avx2-nt"); an unknown name is -EINVAL.
 * - Callbacks (bm_progress_fn, bm_patch_fn) must return normally: leaving
 *   one with longjmp, or a C++ exception, skips bulkmem's cleanup. See
 *   bm_progress_fn for what bulkmem recovers from.
 * - Non-temporal stores are fenced before any function returns.
 * - Everything is thread-safe unless a function says otherwise.
 *
 * Environment: `auto` follows BULKMEM_PROFILE (another tuned profile, or
 * off), BULKMEM_STRATEGY (force a strategy), BULKMEM_NT_THRESHOLD (where
 * hinted calls start streaming) and BULKMEM_DISABLE (hide CPU features),
 * read once per process as by the command: see bulkmem(1); `bulkmem info`
 * shows which are in force.
 *
 * See also: bulkmem(1), pkg-config(1), memcpy(3), move_pages(2),
 * userfaultfd(2).
 */
#ifndef BULKMEM_H
#define BULKMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version and errors ------------------------------------------------ */

/* The version of this header; build.rs refuses to build a library whose
 * Cargo version differs, so the header and library of one release agree. */
#define BULKMEM_VERSION_MAJOR 0
#define BULKMEM_VERSION_MINOR 1
#define BULKMEM_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch: 0.1.0 is 100, 1.2.3 is 10203. */
#define BULKMEM_VERSION_NUMBER \
    (BULKMEM_VERSION_MAJOR * 10000 + BULKMEM_VERSION_MINOR * 100 + \
     BULKMEM_VERSION_PATCH)

/* The library's version, e.g. "0.1.0" (static storage). */
const char *bm_version(void);

/* The library's version as BULKMEM_VERSION_NUMBER computes it (the header
 * a program was built with may be older or newer than the library it runs
 * with). */
int bm_version_number(void);

/* 0 if the running library provides everything the header version
 * major.minor declares: the same major version and a library minor version
 * at least `minor` (a newer minor only adds functions and struct fields).
 * -ENOTSUP otherwise: a different major (an incompatible ABI) or an older
 * library than the program was built for; bm_last_error() then names
 * both versions ("built for bulkmem 0.2, running with the older 0.1.0").
 * Call it once at start-up as BM_CHECK_VERSION(). */
int bm_check_version(int major, int minor);
#define BM_CHECK_VERSION() bm_check_version(BULKMEM_VERSION_MAJOR, BULKMEM_VERSION_MINOR)

/* A description of a return code (0 or a negative errno; static storage). */
const char *bm_strerror(int err);

/* The calling thread's last failure, in words ("" if none yet); successful
 * calls leave it alone. The pointer stays valid for the thread's lifetime;
 * the text changes with the thread's next failure. */
const char *bm_last_error(void);

/* ---- single copies and clears ------------------------------------------ */

/* Hints: what happens to the destination next. */
#define BM_HINT_AUTO 0   /* let bulkmem decide from the size */
#define BM_HINT_REUSE 1  /* read soon: keep it in the cache */
#define BM_HINT_STREAM 2 /* write-once: non-temporal stores */

/* Copy len bytes from src to dst (disjoint) with the primitive `auto`
 * picks for this CPU and size. */
int bm_copy(void *dst, const void *src, size_t len);

/* Zero len bytes at dst. */
int bm_clear(void *dst, size_t len);

/* As bm_copy / bm_clear with a hint (BM_HINT_*). */
int bm_copy_hint(void *dst, const void *src, size_t len, int hint);
int bm_clear_hint(void *dst, size_t len, int hint);

/* As bm_copy / bm_clear with a named strategy ("auto" allowed; NULL means
 * "auto"). -EINVAL for an unknown name or one that cannot do the operation,
 * -ENOTSUP for one this CPU lacks. */
int bm_copy_with(const char *strategy, void *dst, const void *src, size_t len);
int bm_clear_with(const char *strategy, void *dst, size_t len);

/* ---- strategies and calibration ---------------------------------------- */

#define BM_OP_COPY 0
#define BM_OP_CLEAR 1

/* 1 if this CPU can run the strategy, 0 if it lacks a feature it needs,
 * -EINVAL if the name is unknown or NULL. */
int bm_strategy_available(const char *strategy);

/* 1 if the strategy implements the operation (BM_OP_*: "clzero" clears but
 * cannot copy), 0 if not, -EINVAL for an unknown name, NULL or a bad op.
 * A strategy that cannot do the operation is refused with -EINVAL before
 * availability is considered. */
int bm_strategy_supports(const char *strategy, int op);

/* The i-th strategy name ("auto" first); NULL past the last. */
const char *bm_strategy_name(size_t i);

/* The strategy `auto` uses for an operation (BM_OP_*) over `total` bytes in
 * `runs` contiguous runs (1: a single call) with a hint; NULL for a bad op
 * or hint. Static storage. */
const char *bm_auto_choice(int op, size_t total, size_t runs, int hint);

/* 1 if `auto` follows a profile measured by `bulkmem tune` on this CPU, 0 if
 * it uses the built-in rules. */
int bm_is_tuned(void);

/* Why: "tuned: PATH (measured 2 h ago)", "no profile at PATH: ...", ...
 * Static storage. */
const char *bm_profile_status(void);

/* ---- batches on the calling thread ------------------------------------- */

typedef struct bm_extent {
    void *dst;
    const void *src; /* ignored by clears */
    size_t len;
} bm_extent;

/* Copy (clear) every extent; one primitive is chosen for the batch as a
 * whole from its total (128 separate 2 MiB copies are one 256 MiB stream).
 * Extents are validated first (-EINVAL: NULL pointers, a destination
 * overlapping any other extent or its own source); nothing is written then. */
int bm_copy_batch(const bm_extent *ext, size_t n);
int bm_clear_batch(const bm_extent *ext, size_t n);

/* ---- copies that survive a bad page ------------------------------------ */

#define BM_FAULT_SRC 1 /* reading the source faulted */
#define BM_FAULT_DST 2 /* writing the destination faulted */

typedef struct bm_fault {
    size_t offset; /* first byte not copied: bytes before it are done; bytes
                      after it are untouched or already hold their copy */
    void *addr;    /* the faulting address the kernel reported */
    int side;      /* BM_FAULT_SRC or BM_FAULT_DST */
    int code;      /* the signal's si_code: for SIGBUS BUS_ADRERR (2),
                      BUS_MCEERR_AR (4); for SIGSEGV (the call returned
                      -EFAULT) SEGV_MAPERR (1), SEGV_ACCERR (2) */
} bm_fault;

/* Copy (clear) like bm_copy (bm_clear), but a fault while touching the
 * memory stops the operation with *f filled in (f may be NULL) and
 * returns -EIO for a SIGBUS (a file mapping truncated under the caller, a
 * software-poisoned page), -EHWPOISON for hardware poison, -EFAULT for a
 * SIGSEGV (an unmapped or protected page). Until a page is bad they run
 * at bm_copy's (bm_clear's) speed: the same kernel, in a form whose
 * faulting instructions are in an exception table. bulkmem installs a
 * handler for SIGBUS and SIGSEGV (on first use) that chains to the
 * previous one for faults outside its routines. An application that
 * installs its own handler for either afterwards replaces bulkmem's, and
 * checked calls then die on a bad page: keep the old action sigaction()
 * returns and call it for faults you do not own, e.g.
 *
 *     static struct sigaction prev;   (bulkmem's)
 *     static void on_bus(int sig, siginfo_t *si, void *uc) {
 *         if (mine(si->si_addr)) { ...; return; }
 *         if (prev.sa_flags & SA_SIGINFO) prev.sa_sigaction(sig, si, uc);
 *         else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN)
 *             prev.sa_handler(sig);
 *         else { signal(sig, SIG_DFL); raise(sig); }
 *     }
 *     struct sigaction sa = {0};
 *     sa.sa_sigaction = on_bus; sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
 *     sigaction(SIGBUS, &sa, &prev);
 *
 * (To be sure bulkmem's is installed first, make one checked call of
 * length 0 before.) x86_64 only: elsewhere both return -ENOTSUP. */
int bm_copy_checked(void *dst, const void *src, size_t len, bm_fault *f);
int bm_clear_checked(void *dst, size_t len, bm_fault *f);

/* ---- the multi-threaded batch engine ----------------------------------- */

#define BM_PLACE_SPREAD 0 /* round-robin LLC domains (and NUMA nodes) */
#define BM_PLACE_FILL 1   /* fill one LLC domain first */

/* Zero (or a NULL pointer) means the default for every field. */
typedef struct bm_engine_opts {
    size_t threads;       /* workers; 0: one per core, <= 2 per LLC domain */
    int placement;        /* BM_PLACE_* */
    size_t chunk;         /* bytes per chunk (latency bound); 0: 32 MiB */
    const char *strategy; /* NULL or "auto": auto */
    int hint;             /* BM_HINT_* */
} bm_engine_opts;

typedef struct bm_engine bm_engine;

/* A new engine with pinned, reused worker threads; NULL with errno set on
 * failure (EINVAL: bad options, among them more threads than 64 per
 * online CPU (at least 4096); ENOTSUP: unavailable strategy; EAGAIN: a
 * worker thread could not be started, e.g. under RLIMIT_NPROC; the ones
 * already started are stopped and joined first, none is left behind). */
bm_engine *bm_engine_new(const bm_engine_opts *opts);

/* Worker threads of the engine. */
size_t bm_engine_threads(const bm_engine *e);

/* Copy (clear) a batch on the engine's workers; validated as bm_copy_batch.
 * One batch at a time per engine (calls from several threads serialise). */
int bm_engine_copy_batch(bm_engine *e, const bm_extent *ext, size_t n);
int bm_engine_clear_batch(bm_engine *e, const bm_extent *ext, size_t n);

/* Called between chunks, from worker threads, with the bytes completed so
 * far and the batch total. Calls are never concurrent, `done` only grows,
 * and the last call of a complete batch has done == total. It must not
 * submit to the same engine (that call returns -EINVAL).
 *
 * It must return normally. Batches of at most 4 MiB (or one chunk) run on
 * the calling thread, callbacks included; one a callback leaves with
 * longjmp is abandoned with the engine still marked busy. bulkmem limits
 * the damage: when the same thread submits to that engine again from a
 * frame outside the abandoned batch, the mark is taken over and the call
 * proceeds; another thread waiting for the engine gives up with -EBUSY
 * once that batch has made no progress for 1 second (so also while a
 * callback of a batch run on its own thread takes longer than that).
 * Anything else the abandoned call held (its report, progress) is lost.
 * This assumes callbacks do not switch stacks (swapcontext, coroutines). */
typedef void (*bm_progress_fn)(size_t done, size_t total, void *ctx);

typedef struct bm_ctl {
    bm_progress_fn progress; /* may be NULL */
    void *ctx;               /* passed to progress */
    const volatile int *cancel; /* may be NULL; non-zero stops the batch
                                   between chunks */
} bm_ctl;

typedef struct bm_report {
    size_t total;        /* bytes in the batch */
    size_t bytes_done;   /* bytes completed */
    size_t extents_done; /* extents 0..extents_done are complete */
    size_t workers;      /* threads that ran chunks */
    int cancelled;       /* 1 if the cancel flag stopped it */
    const char *strategy; /* the primitive that ran (static storage) */
} bm_report;

/* As bm_engine_copy_batch (clear) with progress and cancellation; ctl and
 * report may be NULL. A cancelled batch returns -ECANCELED, and *report
 * names the completed prefix exactly. (The Rust API returns a cancelled
 * batch as success with its report marked cancelled, since the caller
 * asked for the stop; C has only the return value to say the batch is not
 * complete, so it says it there, and *report is filled either way.) The
 * batch is validated before the
 * cancel flag is read: an invalid batch is -EINVAL even with the flag
 * already set, and *report then says total bytes (saturated), nothing
 * done, not cancelled. */
int bm_engine_copy_batch_ctl(bm_engine *e, const bm_extent *ext, size_t n,
                             const bm_ctl *ctl, bm_report *report);
int bm_engine_clear_batch_ctl(bm_engine *e, const bm_extent *ext, size_t n,
                              const bm_ctl *ctl, bm_report *report);

/* ---- sized structs: the engine API that can grow ----------------------- */

/* bm_engine_opts, bm_ctl and bm_report keep their 0.1 layout forever:
 * programs built against it pass them to the functions above. The _v2
 * structs start with their size, so later releases can append fields and
 * still serve older programs (like Linux's open_how and clone_args).
 * Always initialise them with their _INIT macro, which sets size:
 *
 *   bm_report_v2 r = BM_REPORT_V2_INIT;
 *
 * Inputs (opts, ctl): a size below *_SIZE_VER0 is -EINVAL; a smaller size
 * than this header's (an older program) reads the fields it covers and
 * gives the rest their default (zero); a larger size (a newer program) is
 * accepted if every byte this library does not know is zero, and refused
 * with -E2BIG otherwise (E2BIG from bm_engine_new_v2), since the program
 * asked for something this library cannot do.
 * Outputs (report): a size below *_SIZE_VER0 is -EINVAL; the library
 * fills the fields that fit in size and zeroes bytes it does not know;
 * size itself is left as set.
 * The offsets are checked against the library's by the C suite. */

/* Cancel handles: set from any thread (a signal handler included: it is a
 * single atomic store), read by the batches whose bm_ctl_v2 names it. */
typedef struct bm_cancel bm_cancel;
/* A new handle, not set; NULL with errno ENOMEM. */
bm_cancel *bm_cancel_new(void);
/* Set it: batches using it stop between chunks (-ECANCELED). It cannot
 * be reset; make a new one. -EINVAL for NULL. */
int bm_cancel_set(bm_cancel *c);
/* Free it (NULL is allowed); no batch may still be using it. */
void bm_cancel_free(bm_cancel *c);

/* ---- asynchronous batches ---------------------------------------------- */

/* A batch running in the background (Engine::submit_copy in Rust). */
typedef struct bm_ticket bm_ticket;

/* Check a batch as bm_engine_copy_batch (clear) does (an invalid one is
 * refused here, nothing queued), queue it and return at once with
 * *ticket. Each engine runs its tickets one at a time, in submission
 * order (FIFO). flags must be 0. The extents' memory must stay valid and
 * untouched until the ticket is done or freed, and every ticket must be
 * freed before its engine. */
int bm_engine_submit_copy(bm_engine *e, const bm_extent *ext, size_t n,
                          unsigned flags, bm_ticket **ticket);
int bm_engine_submit_clear(bm_engine *e, const bm_extent *ext, size_t n,
                           unsigned flags, bm_ticket **ticket);
/* Wait up to timeout_ns (negative: no limit; 0: just look) for the batch;
 * then as bm_engine_copy_batch_ctl: 0, or -ECANCELED with *report (may be
 * NULL) naming the completed prefix. -ETIMEDOUT if it is still running.
 * May be called again, from any thread: it returns the same outcome. In a
 * child made by fork(), a parent's ticket never completes: -EINVAL. */
int bm_ticket_wait(bm_ticket *t, long long timeout_ns, bm_report *report);
/* 1 if the batch is done, 0 if not; never blocks. */
int bm_ticket_poll(const bm_ticket *t);
/* An eventfd that becomes readable when the batch is done (for poll or
 * epoll); owned by the ticket: do not read or close it. */
int bm_ticket_fd(const bm_ticket *t);
/* Stop the batch after the chunks in flight (its report stays exact);
 * returns at once. */
int bm_ticket_cancel(bm_ticket *t);
/* Free the ticket (NULL is allowed); a batch still running is cancelled
 * and waited for first, so its memory may be freed afterwards. */
void bm_ticket_free(bm_ticket *t);

typedef struct bm_engine_opts_v2 {
    size_t size;          /* sizeof(bm_engine_opts_v2): the _INIT macro */
    size_t threads;       /* as in bm_engine_opts */
    int placement;
    size_t chunk;
    const char *strategy;
    int hint;
} bm_engine_opts_v2;
#define BM_ENGINE_OPTS_V2_SIZE_VER0 48
#define BM_ENGINE_OPTS_V2_INIT {sizeof(bm_engine_opts_v2), 0, 0, 0, NULL, 0}

typedef struct bm_ctl_v2 {
    size_t size;                /* sizeof(bm_ctl_v2): BM_CTL_V2_INIT */
    bm_progress_fn progress;    /* as in bm_ctl */
    void *ctx;
    const volatile int *cancel; /* may be NULL */
    bm_cancel *cancel_handle;   /* may be NULL; either one stops the batch */
} bm_ctl_v2;
#define BM_CTL_V2_SIZE_VER0 32 /* up to cancel */
#define BM_CTL_V2_INIT {sizeof(bm_ctl_v2), NULL, NULL, NULL, NULL}

typedef struct bm_report_v2 {
    size_t size;          /* sizeof(bm_report_v2): BM_REPORT_V2_INIT */
    size_t total;         /* as in bm_report */
    size_t bytes_done;
    size_t extents_done;
    size_t workers;
    int cancelled;
    const char *strategy;
    size_t chunks;         /* chunks the batch was cut into */
    size_t offloaded;      /* bytes copied by offload channels */
    size_t offload_redone; /* chunks a channel failed and the CPU redid */
    int partial;           /* 1 if extent partial_extent was cut short */
    size_t partial_extent; /* its index (0 if partial is 0) */
    size_t partial_bytes;  /* its leading bytes written */
} bm_report_v2;
#define BM_REPORT_V2_SIZE_VER0 56 /* up to strategy */
#define BM_REPORT_V2_INIT {sizeof(bm_report_v2), 0, 0, 0, 0, 0, NULL, 0, 0, 0, 0, 0, 0}

/* As bm_engine_new with sized options (NULL: defaults). */
bm_engine *bm_engine_new_v2(const bm_engine_opts_v2 *opts);

/* As bm_engine_copy_batch_ctl (clear) with sized ctl and report (either
 * may be NULL). */
int bm_engine_copy_batch_v2(bm_engine *e, const bm_extent *ext, size_t n,
                            const bm_ctl_v2 *ctl, bm_report_v2 *report);
int bm_engine_clear_batch_v2(bm_engine *e, const bm_extent *ext, size_t n,
                             const bm_ctl_v2 *ctl, bm_report_v2 *report);

/* Stop the workers and free the engine (NULL is allowed). */
void bm_engine_free(bm_engine *e);

/* ---- offload: copy channels beside the workers -------------------------- */

#define BM_OFFLOAD_GPU 1      /* a GPU's copy engines (CUDA driver, loaded at run time) */
#define BM_OFFLOAD_EMULATED 2 /* CPU threads with a delay: the scheduling, anywhere */

/* As bm_engine_new, with `channels` copy channels (0: 2, at most what
 * bm_engine_new allows for threads, else EINVAL) of `kind` on CUDA
 * device `device` (ignored for BM_OFFLOAD_EMULATED). Copy batches larger
 * than the inline limit give each channel a thread taking chunks from the
 * same counter as the workers; a chunk goes to a channel only if all of it
 * lies in registered memory, and one a channel fails on is redone on the
 * CPU, as are its chunks when its thread cannot start (RLIMIT_NPROC).
 * NULL with errno ENOTSUP where there is no driver or GPU (and
 * bm_last_error() says which), EINVAL for bad arguments. */
bm_engine *bm_engine_new_offload(const bm_engine_opts *opts, int kind, int device,
                                 size_t channels);

/* Register [addr, addr + len) (addr NULL only with len 0) for the channels (a GPU pins it: costly, so
 * for long-lived buffers); it must stay mapped until unregistered or the
 * engine is freed. 0, or -EINVAL (no offload, an overlap with a registered
 * range) or the backend's error. */
int bm_engine_register(bm_engine *e, const void *addr, size_t len);

/* Undo bm_engine_register of exactly that range, between batches. */
int bm_engine_unregister(bm_engine *e, const void *addr, size_t len);

/* ---- template fill ----------------------------------------------------- */

/* Called once per element, in index order, on the element's copy before it
 * is stored: patch per-element fields there. It must return normally (no
 * longjmp out of it; see the conventions at the top). */
typedef void (*bm_patch_fn)(size_t index, void *elem, size_t elem_len, void *ctx);

/* Repeat the template (tmpl_len bytes) across dst; len must be a whole
 * number of templates and tmpl_len at least 1 (-EINVAL otherwise, nothing
 * written); dst and tmpl must not overlap. Large regions use non-temporal
 * stores, drained before return. */
int bm_fill(void *dst, size_t len, const void *tmpl, size_t tmpl_len);

/* As bm_fill, calling patch(index, elem, tmpl_len, ctx) for each element
 * (a NULL patch makes it bm_fill). */
int bm_fill_with(void *dst, size_t len, const void *tmpl, size_t tmpl_len,
                 bm_patch_fn patch, void *ctx);

/* Order every non-temporal store this thread issued before later stores
 * (sfence), like the kernel's memcpy_nt_drain(). */
void bm_nt_drain(void);

/* ---- page moves with userfaultfd (Linux >= 6.8) ------------------------- */

typedef struct bm_mover bm_mover;

#define BM_MOVE_ALLOW_SRC_HOLES 1u /* skip source holes instead of failing */
#define BM_MOVE_FALLBACK_COPY 2u   /* copy pages MOVE refuses (EBUSY) */
#define BM_MOVE_DONTWAKE 4u        /* don't wake destination faulters */

typedef struct bm_move_report {
    size_t moved;    /* bytes moved */
    size_t copied;   /* bytes copied by the fallback */
    size_t holes;    /* bytes of source holes skipped */
    size_t failures; /* pages left behind (see bm_last_error) */
    size_t ioctls;   /* ioctls issued */
} bm_move_report;

/* A mover owning a userfaultfd; NULL with errno set (ENOTSUP: no
 * userfaultfd or no UFFDIO_MOVE in this kernel; EPERM: userfaultfd
 * refused, see vm.unprivileged_userfaultfd). */
bm_mover *bm_mover_new(void);

/* Register (unregister) a page-aligned destination range with the mover. */
int bm_mover_register(bm_mover *m, void *addr, size_t len);
int bm_mover_unregister(bm_mover *m, void *addr, size_t len);

/* Move the pages of [src, src+len) to the registered, unpopulated
 * [dst, dst+len) without copying (private anonymous memory, page-aligned,
 * not overlapping). Pages left behind make it return -EAGAIN with *r
 * (may be NULL) saying how many. */
int bm_mover_move(bm_mover *m, void *dst, void *src, size_t len,
                  unsigned flags, bm_move_report *r);

/* Close the userfaultfd and free the mover (NULL is allowed). */
void bm_mover_free(bm_mover *m);

/* ---- concurrent compaction (userfaultfd SIGBUS mode) -------------------- */

/* A moving collector's heap compacted while its mutators run (the guide:
 * docs/guide/moves.md; the library's docs, bulkmem::compact). In the
 * pause, bm_compact_prepare moves the heap's pages to a from-space and
 * leaves an empty to-space at the heap's addresses; a mutator touching a
 * page not built yet takes a SIGBUS, which bulkmem's handler serves by
 * calling `produce` for that page and mapping it; the access is then
 * retried. Collector threads (bm_compact_start) build the rest;
 * bm_compact_finish waits for the last page and drains.
 *
 * The producer's contract:
 *   produce(ctx, page, from_space, out)
 *     `page` is the index of the to-space page to build (its address is
 *     heap + page * 4096); `from_space` is the address of the heap's pages
 *     as they were in the pause (the old object at heap + off is now at
 *     from_space + off). Write the page's 4096 bytes at `out` and return
 *     what you left:
 *       BM_FILL_BUILT  `out` holds the page
 *       BM_FILL_ZERO   the page is zeros, free space (`out` ignored)
 *       BM_FILL_SAME   the page is from-space page `page` unchanged, read
 *                      by no other page (`out` ignored): moved back, not
 *                      copied, where the kernel can move pages.
 *                      BM_COMPACT_AUTO moves only such pages (and whole
 *                      2 MiB runs with huge pages); a heap whose pages all
 *                      change moves nothing, and copies every page.
 *     It runs on collector threads and inside SIGBUS handlers on mutator
 *     threads, on the alternate signal stack if the thread has one,
 *     concurrently for different pages, never twice for one page. So it
 *     must be async-signal-safe: read the from-space and your own tables
 *     (built before the pause ends, unchanged during the session), write
 *     `out`; memcpy and memset are fine; no malloc, locks, stdio, or deep
 *     stack (a few KiB are left on a typical alternate stack); never touch
 *     the to-space (that fault cannot be served from inside the handler:
 *     the process dies).
 *   first_source(ctx, page)  (may be NULL: the from-space is kept whole)
 *     the lowest from-space page that to-space pages `page`, page+1, ...
 *     read, never decreasing as `page` grows. For pages past the last
 *     live object (trailing free space) return the heap's page count: they
 *     read nothing. The from-space below it is released once every page
 *     below `page` is built.
 *   last_source(ctx, page)  (bm_compact_space only; may be NULL)
 *     one past the highest from-space page that to-space pages 0..page
 *     read, never decreasing. With it, the from-space read only by pages
 *     mutators built ahead of the collector is released at once, so random
 *     mutators do not hold the heap twice; and once 8 MiB is held twice
 *     all the same, a mutator's fault also builds up to 31 pages after its
 *     own, until they free what they hold (its stall grows, the memory
 *     does not).
 *
 * Mutators:
 *   - may run from the moment bm_compact_prepare returns, across
 *     bm_compact_finish and after it; threads touching the heap must leave
 *     SIGBUS unblocked.
 *   - a system call on an unbuilt page fails with EFAULT (the kernel does
 *     not fault it in): call bm_compact_ensure on the range first. The
 *     same call makes an allocation buffer present and writable with one
 *     ioctl per run, so a thread filling it takes no fault per page.
 *   - fork() during a session builds every page first.
 *   - at a memory limit that refuses rather than kills (a cgroup v1
 *     limit with its OOM killer off), a fault waits for room and so
 *     does bulkmem, but the kernel's write of a signal frame cannot:
 *     a mutator whose SIGBUS frame lands on a stack page never
 *     touched (a fresh alternate stack, like the one Rust's std maps
 *     for each thread) dies of SIGSEGV. Write every page of each
 *     mutator's alternate stack once, at thread start.
 * Signals: bulkmem installs one SIGBUS/SIGSEGV handler (at the first
 * prepare); a handler the program installed before is chained to for every
 * fault that is not a session's or a checked copy's, under the mask the
 * kernel would have given it. A runtime that installs its own afterwards
 * keeps the action sigaction() returns (bulkmem's) and calls it first for
 * every SIGBUS it does not own, as shown at bm_copy_checked; otherwise the
 * first mutator fault kills the process. bulkmem's handler blocks every
 * other signal while it serves a page, so a handler of the program's, a
 * siglongjmp or an asynchronous cancellation happens after the page is
 * mapped, never inside.
 * The heap: page-aligned, mapped throughout, readable and writable
 * (prepare refuses a hole, PROT_NONE or read-only memory, or a range
 * overlapping a live session, saying why in bm_last_error). It may span
 * several mappings; it becomes private anonymous memory (a MAP_SHARED or
 * hugetlb heap is compacted into it, pages copied), and mlockall's
 * MCL_FUTURE keeps applying to it. */
typedef struct bm_compaction bm_compaction;

#define BM_FILL_BUILT 0
#define BM_FILL_ZERO 1
#define BM_FILL_SAME 2

#define BM_COMPACT_AUTO 0u /* move BM_FILL_SAME pages where the kernel can, copy the rest */
#define BM_COMPACT_COPY 1u /* UFFDIO_COPY every page */
#define BM_COMPACT_MOVE 2u /* UFFDIO_MOVE (Linux >= 6.8) where the kernel can, else copy */

#define BM_COMPACT_HUGE_ON 1u  /* bm_compact_options.huge_pages: MADV_HUGEPAGE */
#define BM_COMPACT_HUGE_OFF 2u /* MADV_NOHUGEPAGE; 0: no advice, the system's policy */

typedef int (*bm_produce_fn)(void *ctx, size_t page, const void *from_space,
                             void *out);
typedef size_t (*bm_first_source_fn)(void *ctx, size_t page);
typedef size_t (*bm_last_source_fn)(void *ctx, size_t page);

typedef struct bm_compact_options {
    unsigned mode;       /* BM_COMPACT_AUTO, _COPY or _MOVE */
    unsigned workers;    /* collector threads (0: 1) */
    unsigned batch;      /* pages built per ioctl (0: 64; at most 512) */
    unsigned huge_pages; /* 0, BM_COMPACT_HUGE_ON or BM_COMPACT_HUGE_OFF */
} bm_compact_options;

/* One space of a session: a heap, or a part of one. */
typedef struct bm_compact_space {
    void *heap;                      /* page-aligned */
    size_t len;                      /* a multiple of 4096 */
    bm_produce_fn produce;
    bm_first_source_fn first_source; /* may be NULL */
    bm_last_source_fn last_source;   /* may be NULL */
    void *ctx;                       /* passed to the three callbacks */
} bm_compact_space;

typedef struct bm_compact_stats {
    size_t pages;          /* pages in the heap (all spaces) */
    size_t by_collector;   /* pages the collector threads built */
    size_t by_mutators;    /* pages built in fault handlers or by ensure */
    size_t faults;         /* faults served */
    size_t waits;          /* of which waited for another thread's page */
    size_t refaults;       /* faults on pages already mapped */
    size_t ioctls;         /* mapping ioctls issued */
    size_t moved;          /* pages moved (UFFDIO_MOVE) */
    size_t copied;         /* pages copied (UFFDIO_COPY) */
    size_t zeroed;         /* zero pages mapped (UFFDIO_ZEROPAGE) */
    size_t move_fallbacks; /* moves the kernel refused, copied instead */
    size_t eexist;         /* pages found populated behind the session's
                              back (EEXIST), replaced with the built page */
    size_t released;       /* bytes of from-space released early */
    size_t failed;         /* pages the kernel refused, built in place */
    double pause_us;       /* bm_compact_prepare's duration */
    double stall_p50_us;   /* time in the handler per fault */
    double stall_p99_us;
    double stall_p999_us;
    double stall_max_us;
} bm_compact_stats;

/* 1 if concurrent compaction works here with moves, 0 without moves;
 * negative errno if not at all (bm_last_error says why: no userfaultfd,
 * refused by vm.unprivileged_userfaultfd or a seccomp filter). */
int bm_compact_supported(void);

/* In the collector's pause: prepares the compaction of the page-aligned
 * heap [heap, heap+len) (see above; align it to 1 GiB for a pause that
 * does not grow with it). `opts` may be NULL. NULL with errno set on
 * failure (bm_last_error says why), the heap untouched. */
bm_compaction *bm_compact_prepare(void *heap, size_t len,
                                  bm_produce_fn produce,
                                  bm_first_source_fn first_source, void *ctx,
                                  const bm_compact_options *opts);

/* As bm_compact_prepare, for the `n` spaces of `list` in one pause (a
 * moving space and the arena of its roots; parts of one heap): built in
 * the order given by one set of collector threads. If one is refused,
 * none is touched. */
bm_compaction *bm_compact_prepare_spaces(const bm_compact_space *list,
                                         size_t n,
                                         const bm_compact_options *opts);

/* Starts the collector threads (without it, bm_compact_finish builds what
 * the mutators have not, on the calling thread). */
int bm_compact_start(bm_compaction *c);

/* Builds every unbuilt page of [addr, addr+len) now, on this thread, free
 * space mapped writable with one ioctl per run: before handing heap
 * memory to a system call, or for an allocation buffer about to be
 * filled. */
int bm_compact_ensure(bm_compaction *c, const void *addr, size_t len);

/* Waits for every page, drains the handlers, unregisters, releases the
 * from-space and frees `c`; *stats (may be NULL) says what was done.
 * Mutators may keep running throughout. */
int bm_compact_finish(bm_compaction *c, bm_compact_stats *stats);

/* Sized statistics: those of bm_compact_stats and what later versions
 * count. */
typedef struct bm_compact_stats_v2 {
    size_t size;            /* sizeof(bm_compact_stats_v2):
                               BM_COMPACT_STATS_V2_INIT */
    bm_compact_stats stats; /* as bm_compact_finish fills it */
    size_t memory_waits;    /* builds that met a full memory cgroup
                               (ENOMEM) and waited for room */
} bm_compact_stats_v2;
#define BM_COMPACT_STATS_V2_SIZE_VER0 168
#define BM_COMPACT_STATS_V2_INIT {sizeof(bm_compact_stats_v2), {0}, 0}

/* As bm_compact_finish, with sized statistics (may be NULL). */
int bm_compact_finish_v2(bm_compaction *c, bm_compact_stats_v2 *stats);

/* Compacts entirely inside the pause with no userfaultfd (where
 * bm_compact_supported says no): every page built in place. */
int bm_compact_stop_the_world(void *heap, size_t len, bm_produce_fn produce,
                              bm_first_source_fn first_source, void *ctx,
                              const bm_compact_options *opts,
                              bm_compact_stats *stats);

/* ---- NUMA -------------------------------------------------------------- */

typedef struct bm_migrate_report {
    size_t moved;       /* pages moved */
    size_t already;     /* pages already on the node */
    size_t not_present; /* pages not populated */
    size_t failed;      /* pages that could not move */
} bm_migrate_report;

/* NUMA nodes with memory (at least 1). */
int bm_numa_nodes(void);

/* Move this process's pages of [addr, addr+len) (page-aligned) to node
 * `node` with move_pages(2); *r may be NULL. -ENODEV for no such node;
 * -EAGAIN if some pages could not move (*r says how many); -EINVAL for a
 * range that wraps or ends beyond user space (2^47 on x86_64 without
 * 5-level paging); -ENOMEM if the per-page bookkeeping (8 bytes a page)
 * cannot be allocated. */
int bm_migrate(void *addr, size_t len, int node, bm_migrate_report *r);

#ifdef __cplusplus
}
#endif

#endif /* BULKMEM_H */
