//! The `sluice` binary's subcommands, as a library so that integration
//! tests and benchmarks can drive them directly.

#![forbid(unsafe_code)]

pub mod bench;
