//! What every analysing command (summary, diagnose, export, report) is given: the inputs, the
//! step marker and the decoding threads; opening them, and the lines every such command ends with.

use clap::Args;
use regex_lite::Regex;
use serde::Serialize;

use crate::convert::ConvertOptions;
use crate::error::InputError;
use crate::input::{discover, Notes, Source};
use crate::steps::DEFAULT_STEP_PATTERN;

/// Refuses to write `output` when it is one of the inputs (the same file, by device and inode: also
/// through a link): writing would destroy what is being read. On refusal the exit status (2), said why.
pub fn refuse_output_among_inputs(output: &std::path::Path, sources: &[Source]) -> Result<(), i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(out) = std::fs::metadata(output) else { return Ok(()) };
    if !out.is_file() {
        return Ok(());
    }
    for s in sources {
        if let Ok(m) = std::fs::metadata(&s.path) {
            if (m.dev(), m.ino()) == (out.dev(), out.ino()) {
                eprintln!(
                    "tprof: refusing to write {}: it is the input {} (choose another -o)",
                    output.display(),
                    s.path.display()
                );
                return Err(2);
            }
        }
    }
    Ok(())
}

/// The input arguments the analysing commands share.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Ring files, directories, globs, or Kineto .json/.json.gz traces.
    #[arg(required = true)]
    pub paths: Vec<String>,
    /// Regex naming the NVTX ranges that are steps (default: step, train_step, ProfilerStep#N).
    #[arg(long, value_name = "REGEX")]
    pub step_marker: Option<String>,
    /// Decoding threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// The opened inputs: the files found, what was said about them, and the step pattern.
pub struct Inputs {
    pub sources: Vec<Source>,
    pub notes: Notes,
    pub step_pattern: Regex,
}

impl InputArgs {
    /// The step pattern and the files the paths name; on failure the exit status (2), said why.
    pub fn open(&self) -> Result<Inputs, i32> {
        let step_pattern = self.step_pattern()?;
        let (sources, notes) = self.sources()?;
        Ok(Inputs { sources, notes, step_pattern })
    }

    /// The `--step-marker` regex (or the default); on failure the exit status (2), said why.
    pub fn step_pattern(&self) -> Result<Regex, i32> {
        Regex::new(self.step_marker.as_deref().unwrap_or(DEFAULT_STEP_PATTERN)).map_err(|e| {
            eprintln!("tprof: --step-marker: bad regex: {e}");
            2
        })
    }

    /// The files the paths name, with the notes made finding them; on failure the exit status (2).
    pub fn sources(&self) -> Result<(Vec<Source>, Notes), i32> {
        let mut notes = Notes::default();
        match discover(&self.paths, &mut notes) {
            Ok(s) => Ok((s, notes)),
            Err(e) => {
                eprintln!("tprof: {e}");
                Err(2)
            }
        }
    }

    /// Decoding options with these threads.
    pub fn convert(&self, progress: bool, align_clocks: bool) -> ConvertOptions {
        ConvertOptions { threads: self.threads, progress, align_clocks }
    }
}

/// The notes a command's output starts with: those of finding the inputs, the files not used,
/// then `later` (the analysis' own).
pub fn leading_notes(found: &Notes, errors: &[InputError], later: &mut Vec<String>) -> Vec<String> {
    let mut notes: Vec<String> = found.iter().map(|n| n.to_string()).collect();
    notes.extend(errors.iter().map(|e| format!("not used: {e}")));
    notes.append(later);
    notes
}

/// When nothing could be decoded: says so after the notes; the exit status (1).
pub fn nothing_decoded(notes: &[String]) -> i32 {
    for n in notes {
        eprintln!("tprof: {n}");
    }
    eprintln!("tprof: nothing could be decoded");
    1
}

/// Prints `doc` as pretty JSON on stdout; the exit status.
pub fn print_json(doc: &impl Serialize) -> i32 {
    match serde_json::to_string_pretty(doc) {
        Ok(s) => super::stdout::status(super::stdout::println(&s), 0),
        Err(e) => {
            eprintln!("tprof: {e}");
            1
        }
    }
}
