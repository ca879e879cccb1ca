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

fn main() -> ExitCode {
    purge_freed_pages_at_once();
    let cli = memory_hub::cmd::Cli::parse();
    memory_hub::cmd::init_logging(&cli);
    memory_hub::cmd::exit(&cli, memory_hub::cmd::run(&cli))
}
