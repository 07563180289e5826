//! Hand-made Nodes for placement tests: the control plane has no
//! kubelet, so a test creates Nodes and writes their status itself.

use anyhow::Result;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::cluster::{Cluster, jiff_now};

impl Cluster {
    /// A hand-made Node (no kubelet) with `labels` and `allocatable`,
    /// `Ready=True` through `nodes/status`; deleted with the test.
    pub async fn node(&mut self, base: &str, labels: Value, allocatable: Value) -> Result<String> {
        use k8s_openapi::api::core::v1::Node;
        let name = self.name(base);
        let api = Api::<Node>::all(self.client.clone());
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}
        }))?;
        api.create(&PostParams::default(), &node).await?;
        self.cluster_objects.push(("nodes", name.clone()));
        self.node_heartbeat(&name, &allocatable).await?;
        Ok(name)
    }

    /// Writes a Node's status as a kubelet would: capacity, allocatable
    /// and `Ready=True` now (the node lifecycle controller marks a node
    /// whose heartbeat is older than 40 s unknown).
    pub async fn node_heartbeat(&self, name: &str, allocatable: &Value) -> Result<()> {
        use k8s_openapi::api::core::v1::Node;
        let now = jiff_now();
        let status = json!({"status": {
            "capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "e2e", "lastHeartbeatTime": now, "lastTransitionTime": now}]
        }});
        Api::<Node>::all(self.client.clone())
            .patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await?;
        Ok(())
    }
}
