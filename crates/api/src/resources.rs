//! Which resources are GPUs, for every place that counts GPUs apart from
//! other resources: idle-GPU reclaim (which pods are measured, how many
//! GPUs a workload holds), the `GPUs` printer column, and the simulator's
//! GPU figures. One rule, here. (The webhook's GPU fixes have their own,
//! configurable list of resource names.)

/// A GPU resource: `<vendor>/gpu` (`nvidia.com/gpu`, `amd.com/gpu`), or an
/// NVIDIA MIG slice (`nvidia.com/mig-1g.10gb`).
pub fn is_gpu(name: &str) -> bool {
    name.ends_with("/gpu") || name.starts_with("nvidia.com/mig-")
}

/// An NVIDIA MIG slice (`nvidia.com/mig-1g.10gb`): a GPU resource, but a
/// slice of a GPU, so never added to whole GPUs.
pub fn is_mig(name: &str) -> bool {
    name.starts_with("nvidia.com/mig-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_gpus_and_mig_slices() {
        assert!(is_gpu("nvidia.com/gpu"));
        assert!(is_gpu("amd.com/gpu"));
        assert!(is_gpu("nvidia.com/mig-1g.10gb"));
        assert!(!is_gpu("cpu"));
        assert!(!is_gpu("nvidia.com/gpus"), "a typo is not a GPU");
        assert!(!is_gpu("nvidia.com/gpu.product"), "a node label, not a resource");
        assert!(is_mig("nvidia.com/mig-1g.10gb") && !is_mig("nvidia.com/gpu"));
    }
}
