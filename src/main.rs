//! `memd`: parse the command line, set up logging on stderr, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = memory_hub::cmd::Cli::parse();
    memory_hub::cmd::init_logging(&cli);
    memory_hub::cmd::exit(&cli, memory_hub::cmd::run(&cli))
}
