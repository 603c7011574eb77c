//! Every `TPROF_*` variable is read in one place, the configuration, and documented in the README's
//! configuration table: the variables `Config` asks for, the README's rows and the format crate's list
//! (`settings::vars::ALL`) are the same set.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;

use tprof::base::config::Config;
use tprof_format::settings::vars;

#[test]
fn the_configuration_reads_every_variable() {
    let asked = RefCell::new(BTreeSet::new());
    let _ = Config::from_lookup(|k| {
        asked.borrow_mut().insert(k.to_string());
        None
    });
    let all: BTreeSet<String> = vars::ALL.iter().map(|v| v.to_string()).collect();
    assert_eq!(asked.into_inner(), all);
}

#[test]
fn the_readme_documents_every_variable() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let rows: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `TPROF_"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| format!("TPROF_{name}")))
        .collect();
    let all: BTreeSet<String> = vars::ALL.iter().map(|v| v.to_string()).collect();
    assert_eq!(rows, all, "the README's configuration table and settings::vars::ALL");
}
