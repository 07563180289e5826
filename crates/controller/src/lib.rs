//! # sluice-controller
//!
//! The Kubernetes side of Sluice: the [`adapter`] that turns
//! `sluice.dev/v1alpha1` objects into the admission engine's model, the
//! pure Job ↔ Workload functions in [`job`], and the controller that
//! watches Jobs and Workloads and applies the engine's decisions through
//! the API server.
#![forbid(unsafe_code)]

pub mod adapter;
pub mod index;
pub mod job;
pub mod metrics;
pub mod plan;
pub mod run;
pub mod writer;

#[cfg(test)]
mod testing;
