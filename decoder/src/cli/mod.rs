//! The `tprof` CLI: argument parsing (clap derive) -> plain option structs -> domain code. The
//! analysing commands (summary, diagnose, export, report) share their inputs ([`input::InputArgs`]).

pub mod ctl;
pub mod diagnose;
pub mod diff;
pub mod export;
pub mod input;
pub mod replaced;
pub mod report;
pub mod ringfile;
pub mod run;
pub mod stdout;
pub mod summary;
pub mod summary_host;
pub mod table;
pub mod terminal;
pub mod top;

use clap::{Parser, Subcommand};

/// tprof: profile large-model training. Decode ring files (one per rank) and Kineto traces.
#[derive(Debug, Parser)]
#[command(name = "tprof", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "EXAMPLES:
    tprof summary ./tprof-out                 every rank of a job
    tprof summary 'run/*.tprof' --json        machine-readable
    tprof summary trace.pt.trace.json.gz      an imported PyTorch-profiler trace
    tprof info host-r0-p123.tprof
    tprof check ./tprof-out/*.tprof";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Where the time went: per rank and overall (GPU busy, kernels, API, memcpy, NCCL, steps).
    Summary(summary::SummaryCmd),
    /// What is wrong, where, what it costs and what to do: the efficiency headline and ranked verdicts.
    Diagnose(diagnose::DiagnoseCmd),
    /// What changed between two runs: step time (with a significance test), breakdown, kernels, NCCL, verdicts.
    Diff(diff::DiffCmd),
    /// Write the trace for other tools: Perfetto, Chrome JSON, Kineto (HTA), Parquet, flame graphs.
    Export(export::ExportCmd),
    /// One self-contained HTML page: verdicts, efficiency, steps, kernels, NCCL, memory, counters, flame graph.
    Report(report::ReportCmd),
    /// Live view of running processes from their rings: last steps per rank, kernels, NCCL, verdicts (q quits).
    Top(top::TopCmd),
    /// Run a command under tprof (LD_PRELOAD, NVTX, TPROF_*), pass its exit code through.
    Run(run::RunCmd),
    /// Start / stop / dump / query capture in running processes (one PID or --all ranks).
    Ctl(ctl::CtlCmd),
    /// Header, record counts per type, time span, drops and damage of one ring file (exit 1 when damaged).
    Info { file: std::path::PathBuf },
    /// Every intact record in commit order, names resolved; damage named on stderr (exit 1).
    Dump {
        file: std::path::PathBuf,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Verify ring files (directories: every ring under them): exit 0 when intact, 1 with a damage
    /// report (file, offset, what).
    Check {
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
}

/// Run a parsed command; returns the exit status.
pub fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Summary(c) => summary::run(&c),
        Command::Diagnose(c) => diagnose::run(&c),
        Command::Diff(c) => diff::run(&c),
        Command::Export(c) => export::run(&c),
        Command::Report(c) => report::run(&c),
        Command::Top(c) => top::run(&c),
        Command::Run(c) => run::run(&c),
        Command::Ctl(c) => ctl::run(&c),
        Command::Info { file } => ringfile::info(&file),
        Command::Dump { file, json } => ringfile::dump(&file, json),
        Command::Check { files } => ringfile::check(&files),
    }
}
