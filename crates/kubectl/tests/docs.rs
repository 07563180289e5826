//! docs/cli.md and the README against the plugin's own arguments (clap's
//! `Command`): the flags table says which commands take each flag, each
//! command's heading names its own flags, and the README names every
//! command.

use std::collections::BTreeSet;

use clap::{Command, CommandFactory, Parser};
use sluice_kubectl::PluginArgs;

#[derive(Parser)]
#[command(name = "kubectl sluice")]
struct Plugin {
    #[command(flatten)]
    args: PluginArgs,
}

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The plugin's command with global flags propagated to the subcommands.
fn plugin() -> Command {
    let mut cmd = Plugin::command();
    cmd.build();
    cmd
}

/// The long flags (`--name`) each subcommand takes, by subcommand (clap's
/// own `help` left out).
fn flags() -> Vec<(String, BTreeSet<String>)> {
    plugin()
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .map(|s| {
            let longs = s
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !["help", "version"].contains(l))
                .map(|l| format!("--{l}"))
                .collect();
            (s.get_name().to_string(), longs)
        })
        .collect()
}

/// The rows of cli.md's flags table: the long flag, and the commands cell.
fn table() -> Vec<(String, String)> {
    let doc = read("docs/cli.md");
    let rows: Vec<(String, String)> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| flag | commands | meaning |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let long = cells[0]
                .split(['`', ' ', ','])
                .find(|w| w.starts_with("--"))
                .unwrap_or_else(|| panic!("docs/cli.md: a flags row without a --flag: {l}"))
                .to_string();
            (long, cells[1].to_string())
        })
        .collect();
    assert!(rows.len() >= 4, "docs/cli.md's flags table was not found: {rows:?}");
    rows
}

/// Every flag two or more commands take has a row, every row's flag is
/// real, and the commands cell names exactly the commands that take it
/// ("every command" when all do). `-A` once was said to apply to all.
#[test]
fn the_flags_table_says_which_commands_take_each_flag() {
    let flags = flags();
    let rows = table();
    let takers = |flag: &str| -> Vec<String> {
        flags
            .iter()
            .filter(|(_, longs)| longs.contains(flag))
            .map(|(name, _)| name.clone())
            .collect()
    };
    let shared: BTreeSet<String> = flags
        .iter()
        .flat_map(|(_, longs)| longs.iter().cloned())
        .filter(|f| takers(f).len() >= 2)
        .collect();
    for flag in &shared {
        assert!(
            rows.iter().any(|(long, _)| long == flag),
            "docs/cli.md's flags table has no row for {flag}, which {:?} take",
            takers(flag)
        );
    }
    for (flag, cell) in &rows {
        let who = takers(flag);
        assert!(
            !who.is_empty(),
            "docs/cli.md's flags table has {flag}, which no command takes"
        );
        if who.len() == flags.len() {
            assert_eq!(cell, "every command", "{flag}");
            continue;
        }
        let said: BTreeSet<&str> = cell.split('`').skip(1).step_by(2).collect();
        let real: BTreeSet<&str> = who.iter().map(String::as_str).collect();
        assert_eq!(said, real, "docs/cli.md: the commands that take {flag}");
    }
}

/// A flag only one command takes is in that command's heading
/// (`### \`workloads [--pending | --admitted] [-l SELECTOR]\``).
#[test]
fn each_commands_heading_names_its_own_flags() {
    let doc = read("docs/cli.md");
    let rows = table();
    for (name, longs) in flags() {
        let heading = doc
            .lines()
            .find(|l| l.starts_with("### ") && l.contains(&format!("`{name}")))
            .unwrap_or_else(|| panic!("docs/cli.md has no section for `{name}`"));
        for flag in longs.iter().filter(|f| !rows.iter().any(|(long, _)| long == *f)) {
            assert!(
                heading.contains(flag.as_str()),
                "docs/cli.md's heading for {name} does not name {flag}: {heading}"
            );
        }
    }
}

/// The README's layout row for `crates/kubectl` names every command.
#[test]
fn the_readme_names_every_command() {
    let readme = read("README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `crates/kubectl` |"))
        .expect("README.md has a crates/kubectl row");
    for (name, _) in flags() {
        assert!(
            row.contains(&format!("`{name}`")),
            "README.md's crates/kubectl row does not name `{name}`: {row}"
        );
    }
}
