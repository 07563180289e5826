//! Sluice end-to-end test support. The tests themselves live in `tests/tests/`.
#![forbid(unsafe_code)]

pub mod audit;
pub mod chart_install;
pub mod cluster;
pub mod controller;
pub mod envtest;
pub mod lease_log;
pub mod load;
pub mod node;
pub mod nodes;
pub mod prometheus;
