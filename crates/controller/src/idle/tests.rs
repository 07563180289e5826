use super::*;

fn pod(phase: &str, gpu: Option<&str>, deleting: bool) -> Pod {
    let mut p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}]},
        "status": {"phase": phase}
    }))
    .unwrap();
    if let Some(n) = gpu {
        p.spec.as_mut().unwrap().containers[0].resources =
            Some(serde_json::from_value(serde_json::json!({"limits": {"nvidia.com/gpu": n}})).unwrap());
    }
    if deleting {
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    }
    p
}

#[test]
fn only_running_pods_that_ask_for_gpus_are_measured() {
    assert!(is_running_gpu_pod(&pod("Running", Some("1"), false)));
    assert!(!is_running_gpu_pod(&pod("Pending", Some("1"), false)), "not started");
    assert!(!is_running_gpu_pod(&pod("Succeeded", Some("1"), false)), "done");
    assert!(!is_running_gpu_pod(&pod("Running", None, false)), "no GPU");
    assert!(!is_running_gpu_pod(&pod("Running", Some("0"), false)), "zero GPUs");
    assert!(!is_running_gpu_pod(&pod("Running", Some("1"), true)), "being deleted");
}
