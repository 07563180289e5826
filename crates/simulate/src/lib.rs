//! # sluice-simulate
//!
//! `sluice simulate`: replay a trace through the real admission engine in
//! virtual time and report waits, utilisation, borrowing and preemption.
//!
//! ```text
//! scenario.yaml ──scenario::load──▶ Scenario ──sim::run──▶ SimResult ──report::build──▶ Report
//!   (api CRDs + Trace)             (engine specs +          (per-workload runs,          ├─ table  (terminal)
//!                                   trace workloads)         per-queue time series)      ├─ json   (--json)
//!                                                                                         └─ html   (--html FILE)
//! ```
//!
//! The user-facing reference, including the JSON field names, is
//! `docs/simulate.md`. The command line (flags, progress, output) is the
//! binary's, in `crates/cli/src/simulate.rs`.
#![forbid(unsafe_code)]

pub mod checks;
pub mod clock;
pub mod fairness;
pub mod idle;
pub mod kueue;
pub mod placement;
mod position;
pub mod record;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod trace;
pub mod units;

/// Time for a GPU job's pods to terminate, when neither the command line nor
/// the scenario says.
pub const DEFAULT_EVICTION_DELAY: units::Millis = 30_000;
