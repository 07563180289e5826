//! # sluice-import
//!
//! Kueue's configuration as Sluice objects: ResourceFlavor, ClusterQueue,
//! Cohort, LocalQueue and WorkloadPriorityClass of `kueue.x-k8s.io`
//! (`v1alpha1`, `v1beta1`, `v1beta2`) as `sluice.dev/v1alpha1` objects, and
//! Kueue's `Configuration` (`config.kueue.x-k8s.io` `v1beta1`, `v1beta2`) as
//! the `sluice controller` flags and chart values that correspond.
//!
//! Every key of the input is accounted for by one table,
//! [`mapping::mapping`]: copied, copied with a stated difference, or
//! reported as not supported with its path; nothing is dropped silently.
//! The same table makes the importer's notes and the table in
//! docs/migrating-from-kueue.md. Each object is built with Sluice's types
//! (`sluice-api`) and checked with their `Validate`.
//!
//! ```text
//!  Kueue documents ──▶ kueue::import ──┬─ queue kinds ──▶ walk (mapping) ──▶ typed Sluice object ──▶ Validate
//!   (serde_json)                        ├─ Configuration ─▶ walk (mapping) ──▶ flags + chart values
//!                                       └─ other kinds ───▶ a note each
//! ```
//!
//! Pure: no I/O, no async, no Kubernetes client.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod kueue;
pub mod mapping;
mod render;

pub use kueue::{FairSharing, Import, ImportError, Note, import, is_kueue};
pub use mapping::Status;
