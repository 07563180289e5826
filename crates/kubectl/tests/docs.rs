//! docs/cli.md against the plugin's own arguments.

use clap::{CommandFactory, Parser};
use sluice_kubectl::PluginArgs;

#[derive(Parser)]
struct Plugin {
    #[command(flatten)]
    args: PluginArgs,
}

/// cli.md's `-A` row says, for every subcommand, whether it takes `-A`
/// (it once said that every command does; `why`, `stop` and `resume` act
/// in one namespace).
#[test]
fn the_all_namespaces_row_names_every_subcommand() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `-A, --all-namespaces`"))
        .expect("docs/cli.md has a row for -A");
    let cmd = Plugin::command();
    let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
    assert!(!names.is_empty());
    for name in names {
        assert!(
            row.contains(&format!("`{name}`")),
            "docs/cli.md's -A row does not say whether `{name}` takes it: {row}"
        );
    }
    assert!(row.contains("ignore it"), "{row}");
}
