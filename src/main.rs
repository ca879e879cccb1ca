//! `memd`: parse the command line, set up logging on stderr, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

/// jemalloc for every allocation of the process: Rust's (this global
/// allocator) and the C libraries' (SQLite, ONNX Runtime), whose `malloc`
/// resolves to the one this binary exports (the crate's unprefixed build).
/// Its settings are built in (`.cargo/config.toml`): two arenas, freed pages
/// returned to the system by a background thread after a second. glibc's
/// allocator kept each thread's arena at its high-water mark after a burst,
/// so a long-running server only grew; mimalloc, whose heaps are per thread,
/// kept a little of every short-lived thread (the full-text index starts one
/// per commit, several a second under steady writing), about a megabyte a
/// minute over an hour.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// No transparent huge pages for this process: a first touch in an aligned
/// 2 MiB range can fault in the whole range, and khugepaged (`max_ptes_none`
/// 511 by default) collapses ranges that are mostly freed back into whole
/// huge pages. With them (under mimalloc, which advised them on its arena), a
/// server that had embedded 10,000 memories held 94–108 MiB in huge pages
/// (`AnonHugePages`) and about 60 MiB more resident than without. The flag is
/// the process's (children inherit it).
fn no_transparent_huge_pages() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    let cli = memory_hub::cmd::Cli::parse();
    memory_hub::cmd::init_logging(&cli);
    memory_hub::cmd::exit(&cli, memory_hub::cmd::run(&cli))
}
