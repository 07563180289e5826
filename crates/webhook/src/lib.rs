//! Sluice's admission webhook.
//!
//! ```text
//!  kube-apiserver ──HTTPS──▶ server (axum + rustls, cert reload, metrics)
//!                               │ body bytes
//!                               ▼
//!                            review: decode AdmissionReview, dispatch by path
//!                               │                    │
//!                 mutate: jobs / pods          validate: Sluice kinds, jobs
//!                               │                    │
//!                    gpu (pure rules → JSON patch)   sluice_api::validate()
//!                               │
//!                       cache (informer-style lookups, no API calls)
//! ```
#![forbid(unsafe_code)]

pub mod cache;
pub mod config;
pub mod gpu;
pub mod patch;
pub mod quantity;
pub mod review;
#[cfg(test)]
mod testing;
pub mod validate;

/// The label that puts a Job in a LocalQueue.
pub const QUEUE_LABEL: &str = "sluice.dev/queue";
/// The namespace label that opts a namespace in to default queueing.
pub const DEFAULT_QUEUE_NS_LABEL: &str = "sluice.dev/default-queue";
/// The value of [`DEFAULT_QUEUE_NS_LABEL`] that opts in.
pub const DEFAULT_QUEUE_NS_VALUE: &str = "enabled";
/// The LocalQueue that unlabelled Jobs go to in opted-in namespaces.
pub const DEFAULT_LOCAL_QUEUE: &str = "default";
