//! The documents against the binary's own flags (clap's `Command`) and the
//! chart's values: docs/controller.md's flag table, the flags and chart
//! values the Kueue mapping names (docs/migrating-from-kueue.md is made
//! from it), every chart value a document names, and the README's list of
//! subcommands. A flag or value renamed, added or removed fails here until
//! the docs follow.

use std::path::{Path, PathBuf};

use clap::{Arg, CommandFactory, Parser};
use serde_json::Value;

use crate::Cli;

/// `sluice controller`'s arguments as a command of their own.
#[derive(Parser)]
struct Controller {
    #[command(flatten)]
    args: crate::controller::ControllerArgs,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The controller's flags, without clap's own.
fn controller_flags() -> Vec<Arg> {
    Controller::command()
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| !["help", "version"].contains(&l)))
        .cloned()
        .collect()
}

/// The rows of docs/controller.md's flag table, as cells.
fn flag_rows() -> Vec<Vec<String>> {
    let doc = read("docs/controller.md");
    let rows: Vec<Vec<String>> = doc
        .lines()
        .skip_while(|l| !l.starts_with("## Flags"))
        .skip_while(|l| !l.starts_with("| flag | env | default |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect())
        .collect();
    assert!(rows.len() > 10, "docs/controller.md's flag table was not found");
    rows
}

/// Each flag has a row naming it, its environment variable and its
/// default; each row names only real flags.
#[test]
fn the_controller_flag_table_is_the_controllers_flags() {
    let rows = flag_rows();
    let flags = controller_flags();
    let mut problems = Vec::new();
    for arg in &flags {
        let long = format!("`--{}`", arg.get_long().unwrap_or_default());
        let Some(row) = rows.iter().find(|r| r[0].split(", ").any(|f| f == long)) else {
            problems.push(format!("no row for {long}"));
            continue;
        };
        if let Some(env) = arg.get_env() {
            let env = format!("`{}`", env.to_string_lossy());
            if !row[1].split(", ").any(|e| e == env) {
                problems.push(format!("{long}: its row does not give {env} (it says {})", row[1]));
            }
        }
        for default in arg.get_default_values() {
            let default = default.to_string_lossy();
            if !row[2].contains(default.as_ref()) {
                problems.push(format!(
                    "{long}: its row does not give its default {default:?} ({})",
                    row[2]
                ));
            }
        }
    }
    for row in &rows {
        for named in row[0].split(", ") {
            let long = named.trim_matches('`').trim_start_matches("--");
            if !flags.iter().any(|a| a.get_long() == Some(long)) {
                problems.push(format!(
                    "the table names {named}, which is not a flag of sluice controller"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/controller.md's flag table:\n{}",
        problems.join("\n")
    );
}

/// The chart's values.yaml.
fn chart_values() -> Value {
    serde_saphyr::from_str(&read("charts/sluice/values.yaml")).unwrap()
}

/// Whether `path` (`controller.placement`) is a key of the chart's values.
fn is_chart_value(values: &Value, path: &str) -> bool {
    let mut v = values;
    for key in path.split('.') {
        match v.get(key) {
            Some(next) => v = next,
            None => return false,
        }
    }
    true
}

/// The chart's top-level value keys.
fn top_keys(values: &Value) -> Vec<String> {
    values
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// The `sluice controller` flags and chart values the Kueue mapping names
/// (its Sluice column and notes, which docs/migrating-from-kueue.md and the
/// importer's notes print) are real.
#[test]
fn the_kueue_mapping_names_real_flags_and_chart_values() {
    let flags = controller_flags();
    let values = chart_values();
    let tops = top_keys(&values);
    let mut problems = Vec::new();
    for row in sluice_import::mapping::mapping() {
        for word in format!("{} {}", row.sluice, row.note)
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | ';' | '`' | '='))
            .map(|w| w.trim_end_matches([':', '.']))
        {
            if let Some(long) = word.strip_prefix("--") {
                if !flags.iter().any(|a| a.get_long() == Some(long)) {
                    problems.push(format!("{}: {word} is not a flag of sluice controller", row.kueue));
                }
            } else if word.contains('.')
                && tops.iter().any(|t| word.starts_with(&format!("{t}.")))
                && !is_chart_value(&values, word)
            {
                problems.push(format!("{}: {word} is not a value of the chart", row.kueue));
            }
        }
    }
    assert!(problems.is_empty(), "the Kueue mapping names:\n{}", problems.join("\n"));
}

/// Every chart value a document names in code font (`controller.placement`,
/// `certificates.mode=certManager`) is a key of values.yaml.
/// docs/migrating-from-kueue.md is left out: its Kueue column names Kueue's
/// fields, and its Sluice column is checked above.
#[test]
fn the_docs_name_only_real_chart_values() {
    let values = chart_values();
    let tops = top_keys(&values);
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("migrating-from-kueue.md"))
        .collect();
    for f in [
        "README.md",
        "examples/README.md",
        "crates/webhook/README.md",
        "charts/sluice/values.yaml",
    ] {
        files.push(root().join(f));
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for code in text.split('`').skip(1).step_by(2) {
            let path = code.split(['=', ':', ' ']).next().unwrap_or_default();
            let is_value_path = path.contains('.')
                && tops.iter().any(|t| path.starts_with(&format!("{t}.")))
                && !path.contains('/')
                && !path.ends_with(".rs");
            if !is_value_path {
                continue;
            }
            checked += 1;
            if !is_chart_value(&values, path) {
                problems.push(format!("{}: `{code}`", file.display()));
            }
        }
    }
    assert!(checked > 20, "only {checked} chart values found in the docs");
    assert!(
        problems.is_empty(),
        "documents name chart values that charts/sluice/values.yaml does not have:\n{}",
        problems.join("\n")
    );
}

/// The README's layout rows name every subcommand of `sluice` and of
/// `sluice bench`.
#[test]
fn the_readme_names_every_subcommand() {
    let readme = read("README.md");
    let row = |start: &str| {
        readme
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("README.md has no row {start}"))
            .to_string()
    };
    let cli = row("| `crates/cli` |");
    for sub in Cli::command().get_subcommands().filter(|s| s.get_name() != "help") {
        assert!(
            cli.contains(&format!("`{}", sub.get_name())),
            "README.md's crates/cli row does not name {}",
            sub.get_name()
        );
    }
    let bench = row("| `crates/bench` |");
    let cmd = Cli::command();
    let bench_cmd = cmd.find_subcommand("bench").expect("sluice bench");
    for sub in bench_cmd.get_subcommands() {
        assert!(
            bench.contains(&format!("`{}`", sub.get_name())),
            "README.md's crates/bench row does not name {}",
            sub.get_name()
        );
    }
}
