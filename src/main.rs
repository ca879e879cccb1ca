//! `memd`: parse the command line, set up logging on stderr, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc for every allocation of the process: Rust's (this global
/// allocator) and, through its `override` feature, the C libraries' (SQLite,
/// ONNX Runtime), whose `malloc` resolves to the one this binary exports.
/// glibc's allocator kept each thread's arena at its high-water mark after a
/// burst (a catch-up, a batch of concurrent searches, a long text embedded),
/// so a long-running server only grew.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc 2 (its `mi_option_e` enumeration;
/// the crate exports no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed pages go back to the system at once instead of after mimalloc's
/// default 10 ms, which is only checked on later allocations: a server that
/// goes quiet after a burst would otherwise keep them.
#[allow(unsafe_code)]
fn purge_freed_pages_at_once() {
    // SAFETY: sets one of mimalloc's global options (a number, no pointers);
    // allowed at any time, before or after allocations.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// No transparent huge pages for this process. mimalloc advises them on its
/// arena (`madvise(MADV_HUGEPAGE)`, before `main` runs), so a first touch in
/// an aligned 2 MiB range can fault in the whole range, and khugepaged
/// (`max_ptes_none` 511 by default) collapses ranges that are mostly freed
/// back into whole huge pages: with them, a server that had embedded 10,000
/// memories held 94–108 MiB in huge pages (`AnonHugePages`) and about
/// 60 MiB more resident than without. The flag is the process's (children
/// inherit it); mimalloc's own `allow_thp` option is read before `main`.
fn no_transparent_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    purge_freed_pages_at_once();
    let cli = memory_hub::cmd::Cli::parse();
    memory_hub::cmd::init_logging(&cli);
    memory_hub::cmd::exit(&cli, memory_hub::cmd::run(&cli))
}
