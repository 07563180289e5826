//! # sluice-controller
//!
//! The Kubernetes side of Sluice (`sluice controller`):
//!
//! ```text
//!  watchers ─► cache ─► index (engine, no API calls) ─► plans ─► writer ─► API server
//! ```
//!
//! - `sluice_convert` (its own crate, shared with `sluice simulate`):
//!   `sluice.dev/v1alpha1` objects → the engine's model, and the engine's
//!   decisions → the text users read;
//! - `sluice_kinds` (its own crate, shared with the webhook): the kinds
//!   of object Sluice queues, one file each, as pure functions (their
//!   Workloads, the patches that hold, start and restore them);
//! - [`index`]: state fed by watch events, driving the engine, producing
//!   [`plan::Plan`]s; restart restore, rollback;
//! - [`writer`]: applies plans (server-side apply, merge patches, Events);
//! - [`run`]: watchers, cache, leader election, cycles, queue status,
//!   `/metrics`, `/healthz`, `/readyz`;
//! - [`idle`]: idle-GPU reclaim's checks (pods, Prometheus, the window
//!   rule); the index acts on them;
//! - [`limit`]: the client-side write limit (token bucket);
//! - [`metrics`]: the Prometheus registry;
//! - [`outage`]: API outages logged once each way, not once per failed call;
//!
//! `docs/controller.md` describes the behaviour, flags and tests.
#![forbid(unsafe_code)]

pub mod idle;
pub mod index;
pub mod limit;
pub mod metrics;
pub mod outage;
pub mod plan;
pub mod run;
pub mod writer;

#[cfg(test)]
mod testing;
