//! The exported symbols of the C library, one line each.
//!
//! rustc links a cdylib with its own version script, listing every
//! `#[no_mangle]` function under an anonymous (unversioned) node, and that
//! node wins over any script of ours: such symbols can never carry a
//! version. So the C entry points are ordinary Rust functions, and the
//! `bm_*` names are defined here, in assembly, as a jump to them: rustc
//! does not see these names, and bulkmem.map gives each its version node
//! (BULKMEM_0.1). The jump costs one direct branch per call; the static
//! library gets the same global names.
//!
//! Adding a function: write it, list it here, and add it to bulkmem.map
//! under the node of its release (tests/c_suite.rs fails otherwise). A
//! `#[no_mangle]` function would be exported unversioned, which the suite
//! also refuses.

/// Defines each `name` as a global function that jumps to `path`.
macro_rules! exports {
    ($($name:ident => $path:path;)*) => {
        core::arch::global_asm!(
            ".pushsection .text.bm_exports,\"ax\",%progbits",
            $(
                concat!(".globl ", stringify!($name)),
                concat!(".type ", stringify!($name), ",%function"),
                ".p2align 4",
                concat!(stringify!($name), ":"),
                #[cfg(target_arch = "x86_64")]
                concat!("jmp {", stringify!($name), "}"),
                #[cfg(target_arch = "aarch64")]
                concat!("b {", stringify!($name), "}"),
                concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
            )*
            ".popsection",
            $($name = sym $path,)*
        );
    };
}

exports! {
    bm_copy_batch => crate::batch::bm_copy_batch;
    bm_clear_batch => crate::batch::bm_clear_batch;
    bm_engine_new => crate::batch::bm_engine_new;
    bm_engine_new_offload => crate::batch::bm_engine_new_offload;
    bm_engine_register => crate::batch::bm_engine_register;
    bm_engine_unregister => crate::batch::bm_engine_unregister;
    bm_engine_threads => crate::batch::bm_engine_threads;
    bm_engine_free => crate::batch::bm_engine_free;
    bm_engine_copy_batch => crate::batch::bm_engine_copy_batch;
    bm_engine_clear_batch => crate::batch::bm_engine_clear_batch;
    bm_engine_copy_batch_ctl => crate::batch::bm_engine_copy_batch_ctl;
    bm_engine_clear_batch_ctl => crate::batch::bm_engine_clear_batch_ctl;
    bm_fill => crate::fill::bm_fill;
    bm_fill_with => crate::fill::bm_fill_with;
    bm_nt_drain => crate::fill::bm_nt_drain;
    bm_version => crate::version::bm_version;
    bm_version_number => crate::version::bm_version_number;
    bm_check_version => crate::version::bm_check_version;
    bm_strerror => crate::messages::bm_strerror;
    bm_last_error => crate::messages::bm_last_error;
    bm_mover_new => crate::mover::bm_mover_new;
    bm_mover_register => crate::mover::bm_mover_register;
    bm_mover_unregister => crate::mover::bm_mover_unregister;
    bm_mover_move => crate::mover::bm_mover_move;
    bm_mover_free => crate::mover::bm_mover_free;
    bm_compact_supported => crate::compact::bm_compact_supported;
    bm_compact_prepare => crate::compact::bm_compact_prepare;
    bm_compact_prepare_spaces => crate::compact::bm_compact_prepare_spaces;
    bm_compact_start => crate::compact::bm_compact_start;
    bm_compact_ensure => crate::compact::bm_compact_ensure;
    bm_compact_finish => crate::compact::bm_compact_finish;
    bm_compact_finish_v2 => crate::ext::bm_compact_finish_v2;
    bm_compact_stop_the_world => crate::compact::bm_compact_stop_the_world;
    bm_numa_nodes => crate::numa::bm_numa_nodes;
    bm_migrate => crate::numa::bm_migrate;
    bm_copy => crate::single::bm_copy;
    bm_clear => crate::single::bm_clear;
    bm_copy_hint => crate::single::bm_copy_hint;
    bm_clear_hint => crate::single::bm_clear_hint;
    bm_copy_with => crate::single::bm_copy_with;
    bm_clear_with => crate::single::bm_clear_with;
    bm_strategy_available => crate::single::bm_strategy_available;
    bm_strategy_supports => crate::single::bm_strategy_supports;
    bm_strategy_name => crate::single::bm_strategy_name;
    bm_auto_choice => crate::single::bm_auto_choice;
    bm_is_tuned => crate::single::bm_is_tuned;
    bm_profile_status => crate::single::bm_profile_status;
    bm_copy_checked => crate::single::bm_copy_checked;
    bm_clear_checked => crate::single::bm_clear_checked;
    bm_engine_new_v2 => crate::ext::bm_engine_new_v2;
    bm_engine_copy_batch_v2 => crate::ext::bm_engine_copy_batch_v2;
    bm_engine_clear_batch_v2 => crate::ext::bm_engine_clear_batch_v2;
    bm_cancel_new => crate::ext::bm_cancel_new;
    bm_cancel_set => crate::ext::bm_cancel_set;
    bm_cancel_free => crate::ext::bm_cancel_free;
    bm_engine_submit_copy => crate::ticket::bm_engine_submit_copy;
    bm_engine_submit_clear => crate::ticket::bm_engine_submit_clear;
    bm_ticket_wait => crate::ticket::bm_ticket_wait;
    bm_ticket_poll => crate::ticket::bm_ticket_poll;
    bm_ticket_fd => crate::ticket::bm_ticket_fd;
    bm_ticket_cancel => crate::ticket::bm_ticket_cancel;
    bm_ticket_free => crate::ticket::bm_ticket_free;
}
