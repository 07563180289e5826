//! `kubectl-sluice`: the kubectl plugin (`kubectl sluice …` runs it from
//! PATH). The commands live in the `sluice-kubectl` crate.

#![forbid(unsafe_code)]

mod plugin;

fn main() -> std::process::ExitCode {
    plugin::main()
}
