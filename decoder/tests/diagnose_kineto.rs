//! `tprof diagnose` on the real Kineto traces (`testkit::kineto_traces_dir`): it runs without errors,
//! the efficiency shares add up, and every verdict is well formed.

use std::path::PathBuf;

use regex_lite::Regex;
use tprof_decoder::convert::ConvertOptions;
use tprof_decoder::diagnose::{diagnose, DiagnoseOptions};
use tprof_decoder::input::{discover, Notes};
use tprof_decoder::steps::DEFAULT_STEP_PATTERN;

fn data_dir() -> PathBuf {
    tprof_decoder::testkit::kineto_traces_dir()
}

#[test]
fn real_kineto_traces_diagnose() {
    let dir = data_dir();
    assert!(dir.is_dir(), "real Kineto traces missing: {}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    let re = Regex::new(DEFAULT_STEP_PATTERN).unwrap();
    for f in &files {
        let mut notes = Notes::default();
        let sources = discover(&[f.display().to_string()], &mut notes).expect("discover");
        let convert = ConvertOptions { threads: 1, progress: false, align_clocks: true };
        let (d, errors) = diagnose(&sources, &re, &DiagnoseOptions::default(), &convert);
        assert!(errors.is_empty(), "{}: {errors:?}", f.display());
        assert_eq!(d.efficiency.ranks.len(), 1, "{}", f.display());
        let e = &d.efficiency.overall;
        assert!(e.gpu_times && e.wall_ns > 0, "{}", f.display());
        let sum: f64 = e.breakdown.parts().iter().map(|p| p.1).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{}: shares add up to {sum}", f.display());
        assert!(e.useful > 0.05 && e.useful < 0.9, "{}: useful {}", f.display(), e.useful);
        assert!(!d.verdicts.is_empty(), "{}", f.display());
        for v in &d.verdicts {
            assert!((0.0..=1.0).contains(&v.severity));
            assert!(!v.summary.is_empty() && !v.advice.is_empty() && !v.evidence_text().is_empty(), "{v:?}");
        }
        let json = serde_json::to_value(&d).expect("json");
        assert!(json["efficiency"]["overall"]["useful"].is_number());
        assert!(json["verdicts"][0]["kind"].is_string());
        assert!(json["verdicts"][0]["where"].is_object());
        let line: Vec<String> = d.verdicts.iter().map(|v| format!("{} {:.3}", v.kind.id(), v.severity)).collect();
        eprintln!("{}: useful {:.2}; {}", f.file_name().unwrap().to_string_lossy(), e.useful, line.join(", "));
    }
}
