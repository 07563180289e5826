//! GPUs that nodes share: the NVIDIA GPU Operator's time-slicing and MPS
//! advertise each device as several (`replicas`) of `nvidia.com/gpu` (or of
//! `nvidia.com/gpu.shared` when it renames them), and label the node with
//! the count and the strategy. One rule for every place that asks: which
//! resources a shared node multiplies, how many replicas a node's labels
//! say, and whether a pod set asks for a replica rather than a whole GPU.

use std::collections::BTreeMap;

/// The node label with the number of replicas of each GPU (`4`).
pub const REPLICAS_LABEL: &str = "nvidia.com/gpu.replicas";

/// The node label with the sharing strategy (`time-slicing`, `mps`, or
/// `none`).
pub const STRATEGY_LABEL: &str = "nvidia.com/gpu.sharing-strategy";

/// The resources a sharing node advertises as replicas.
pub const SHARED_RESOURCES: [&str; 2] = ["nvidia.com/gpu", "nvidia.com/gpu.shared"];

/// Whether a shared node advertises `resource` as replicas of its GPUs.
pub fn is_shared_resource(resource: &str) -> bool {
    SHARED_RESOURCES.contains(&resource)
}

/// The replicas of each GPU that these node labels say, when more than
/// one: `None` for a node that does not share its GPUs (no label, `1`, or a
/// value that is not a positive number).
pub fn replicas(labels: &BTreeMap<String, String>) -> Option<u32> {
    labels
        .get(REPLICAS_LABEL)
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&r| r > 1)
}

/// Whether a pod set with this node selector asks for a shared GPU: it
/// selects nodes by their replica count or by a sharing strategy other
/// than `none`. Any other GPU request asks for whole GPUs.
pub fn asks_for_shared_gpu(node_selector: &BTreeMap<String, String>) -> bool {
    node_selector.contains_key(REPLICAS_LABEL) || node_selector.get(STRATEGY_LABEL).is_some_and(|s| s != "none")
}

/// What a pod charged `amount` of an output for each replica is charged on
/// a node of `replicas` replicas per GPU: a replica's share, rounded up
/// (never less than what it holds).
pub fn per_replica(amount: i64, replicas: u32) -> i64 {
    if replicas <= 1 {
        return amount;
    }
    let r = i64::from(replicas);
    amount / r + i64::from(amount % r != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn replicas_come_from_the_operator_label() {
        assert_eq!(replicas(&labels(&[(REPLICAS_LABEL, "4")])), Some(4));
        assert_eq!(
            replicas(&labels(&[(REPLICAS_LABEL, "1")])),
            None,
            "one replica shares nothing"
        );
        assert_eq!(replicas(&labels(&[(REPLICAS_LABEL, "four")])), None);
        assert_eq!(replicas(&labels(&[])), None);
    }

    #[test]
    fn a_shared_gpu_is_asked_for_by_label() {
        assert!(asks_for_shared_gpu(&labels(&[(STRATEGY_LABEL, "time-slicing")])));
        assert!(asks_for_shared_gpu(&labels(&[(STRATEGY_LABEL, "mps")])));
        assert!(asks_for_shared_gpu(&labels(&[(REPLICAS_LABEL, "4")])));
        assert!(!asks_for_shared_gpu(&labels(&[(STRATEGY_LABEL, "none")])));
        assert!(!asks_for_shared_gpu(&labels(&[("nvidia.com/gpu.product", "A100")])));
    }

    #[test]
    fn a_replica_is_charged_its_share_rounded_up() {
        assert_eq!(per_replica(720_720, 4), 180_180);
        assert_eq!(per_replica(1000, 3), 334);
        assert_eq!(per_replica(1000, 1), 1000);
        assert!(is_shared_resource("nvidia.com/gpu") && !is_shared_resource("nvidia.com/mig-1g.10gb"));
    }
}
