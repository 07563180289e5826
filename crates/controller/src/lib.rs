//! # sluice-controller
//!
//! The Kubernetes side of Sluice. Today it holds the [`adapter`] that turns
//! `sluice.dev/v1alpha1` objects into the admission engine's model; the
//! controller loop that watches Jobs and Workloads and applies the engine's
//! decisions through the API server is being built on top of it.
#![forbid(unsafe_code)]

pub mod adapter;
