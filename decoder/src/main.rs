//! The `tprof` command line.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = tprof_decoder::cli::Cli::parse();
    std::process::exit(tprof_decoder::cli::run(cli));
}
