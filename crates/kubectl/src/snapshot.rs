//! What the plugin read from the cluster: the Sluice objects the user may
//! see. Views are pure functions of a [`Snapshot`] (and the time), so that
//! they are tested on recorded objects.

use k8s_openapi::jiff::Timestamp;
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, Workload};

/// The objects a command works from.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// `None`: the user may not list ClusterQueues (a namespaced user).
    pub cluster_queues: Option<Vec<ClusterQueue>>,
    pub local_queues: Vec<LocalQueue>,
    pub workloads: Vec<Workload>,
    /// When it was read.
    pub now: Timestamp,
}

impl Snapshot {
    /// The LocalQueue `namespace/name`.
    pub fn local_queue(&self, namespace: &str, name: &str) -> Option<&LocalQueue> {
        self.local_queues
            .iter()
            .find(|q| q.metadata.namespace.as_deref() == Some(namespace) && q.metadata.name.as_deref() == Some(name))
    }

    /// The ClusterQueue `name`, if the user may read ClusterQueues.
    pub fn cluster_queue(&self, name: &str) -> Option<&ClusterQueue> {
        self.cluster_queues
            .as_ref()?
            .iter()
            .find(|q| q.metadata.name.as_deref() == Some(name))
    }
}
