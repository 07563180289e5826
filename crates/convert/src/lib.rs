//! Between Sluice's API and its engine, in both directions, for every
//! caller alike (the controller on a cluster, `sluice simulate` in virtual
//! time), so a scenario file and a cluster mean the same thing and say the
//! same thing:
//!
//! - [`adapter`]: `sluice.dev/v1alpha1` objects into the engine's plain
//!   types (total, or an error with the field path);
//! - [`foreign`]: another controller's admissions (Kueue's Workloads) as
//!   quota the engine must count;
//! - [`transform`]: resource transformations (a MIG slice as a seventh of
//!   a GPU-equivalent) with their factors in engine units;
//! - [`usage`]: budgets, and usage over time between `status.usage` and
//!   the usage book;
//! - [`text`]: the engine's decisions (why a workload waits, why it was
//!   preempted or evicted) into the sentences users read in conditions,
//!   Events and reports. The engine returns structure only.
//!
//! Depends on `sluice-api` and `sluice-scheduler`, and on no runtime.

#![forbid(unsafe_code)]

pub mod adapter;
pub mod foreign;
pub mod nodes;
pub mod text;
pub mod transform;
pub mod usage;

pub use adapter::*;
