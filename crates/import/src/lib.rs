//! # sluice-import
//!
//! Kueue's configuration as Sluice objects: ResourceFlavor, ClusterQueue,
//! Cohort, LocalQueue and WorkloadPriorityClass of `kueue.x-k8s.io`
//! (`v1alpha1`, `v1beta1`, `v1beta2`), and Kueue's `Configuration` as the
//! `sluice controller` flags that correspond. Every field of the input is
//! accounted for by [`mapping::mapping`]: copied, copied with a stated
//! difference, or reported as not supported with its path; nothing is
//! dropped silently. Pure: no I/O.
#![forbid(unsafe_code)]

pub mod kueue;
pub mod mapping;

pub use kueue::{Import, ImportError, Note, import};
