// header.cpp - bulkmem.h must compile as C++17 (-Wall -Wextra -Werror) and
// its declarations must link with C linkage.
#include <bulkmem.h>

#include <cstdio>
#include <vector>

static void progress(size_t done, size_t total, void *ctx)
{
    *static_cast<size_t *>(ctx) = done + total;
}

int main()
{
    std::printf("bulkmem %s\n", bm_version());

    std::vector<unsigned char> src(4096 + 17), dst(src.size(), 0);
    for (size_t i = 0; i < src.size(); i++)
        src[i] = static_cast<unsigned char>(i * 7 + 3);

    bool ok = bm_copy(dst.data(), src.data(), src.size()) == 0 && dst == src;

    bm_extent ext{};
    ext.dst = dst.data();
    ext.src = src.data();
    ext.len = 100;
    ok = ok && bm_clear_batch(&ext, 1) == 0 && dst[0] == 0 && dst[99] == 0 && dst[100] == src[100];

    // Types and callbacks as C++ would use them (not run).
    bm_engine_opts opts{};
    opts.placement = BM_PLACE_SPREAD;
    opts.hint = BM_HINT_STREAM;
    size_t seen = 0;
    bm_ctl ctl{};
    ctl.progress = progress;
    ctl.ctx = &seen;
    bm_report report{};
    bm_fault fault{};
    bm_move_report mr{};
    bm_migrate_report gr{};
    bm_patch_fn patch = nullptr;
    (void)opts, (void)ctl, (void)report, (void)fault, (void)mr, (void)gr, (void)patch;

    if (!ok)
        std::printf("FAIL header.cpp: bm_copy / bm_clear_batch from C++\n");
    std::printf("%d passed, %d failed\n", ok ? 1 : 0, ok ? 0 : 1);
    return ok ? 0 : 1;
}
