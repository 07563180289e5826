//! Sluice's Kubernetes API: the `sluice.dev/v1alpha1` custom resources and
//! everything needed to read them correctly.
//!
//! - [`v1alpha1`]: the six kinds — [`ResourceFlavor`], [`ClusterQueue`],
//!   [`Cohort`], [`LocalQueue`], [`WorkloadPriorityClass`], [`Workload`] — as kube
//!   `CustomResource` types, plus condition types and reasons
//!   ([`v1alpha1::conditions`]).
//! - [`quantity`]: exact parsing of Kubernetes quantities into integer
//!   engine units (milli-units; 720 720ths of a GPU-equivalent), and
//!   formatting back.
//! - [`validation`]: the [`Validate`] trait; `validate()` on each kind
//!   returns every cross-field violation with its field path. This, not the
//!   CRD's CEL rules, is the rule of record.
//! - [`labels`]: label and annotation keys (`sluice.dev/queue`, …).
//! - [`selector`]: which namespaces a ClusterQueue serves (unset: none,
//!   `{}`: all, as in Kueue) and the reason users read when it does not.
//! - [`duration`]: durations as flags and scenario files write them
//!   (`90s`, `2h30m`), one rule for every caller.
//! - [`crd`]: the CustomResourceDefinitions, in a stable order.
//! - [`manifest`]: multi-document YAML into typed objects, for files such as
//!   `examples/` and `sluice simulate` inputs.
//! - [`strict`]: the keys of a manifest that its kind's schema does not
//!   declare (which the API server would drop silently), with the nearest
//!   known name.
//! - [`transform`]: resource transformations (a MIG slice as a seventh of
//!   a GPU-equivalent), as the controller, the chart and the simulator
//!   take them.
//!
//! The crate has no async code and no I/O beyond what callers hand it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crd;
pub mod duration;
pub mod labels;
pub mod manifest;
pub mod quantity;
pub mod resources;
pub mod selector;
pub mod strict;
pub mod transform;
pub mod v1alpha1;
pub mod validation;

pub use manifest::{Document, ManifestError, SluiceObject, parse_manifests};
pub use v1alpha1::{ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload, WorkloadPriorityClass};
pub use validation::{Validate, ValidationError, Violation};
