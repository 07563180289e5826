//! End-to-end tests of RayJobs (`ray.io/v1`) against a real API server:
//! the test installs a minimal RayJob CRD (`tests/crds/ray.io_rayjobs.yaml`)
//! before the controller starts (it finds the kind by discovery) and plays
//! KubeRay where one is needed (its status); no Ray pods exist.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test ray -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::Result;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sluice_e2e::cluster::{Cluster, install_crd_file, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

fn rayjob(name: &str, workers: u32) -> Result<DynamicObject> {
    let pod = |gpus: u32, selector: Value| {
        json!({"spec": {"nodeSelector": selector, "containers": [{"name": "ray", "image": "rayproject/ray:2.9.0",
            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"}},
        "spec": {"suspend": true, "shutdownAfterJobFinishes": true, "entrypoint": "python tune.py", "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": pod(1, json!({"pool": "cpu"}))},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": workers, "rayStartParams": {}, "template": pod(2, json!(null))}
            ]
        }}
    }))?)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_rayjob_is_admitted_whole_its_groups_injected_preempted_restored_and_it_finishes_while_a_larger_one_waits()
-> Result<()> {
    let mut c = Cluster::start().await?;
    install_crd_file(&c.client, "ray.io_rayjobs.yaml", "ray.io/v1", "rayjobs").await?;
    let f = c.flavor("a100").await?;
    let cq = c
        .gpu_queue("cq", &f, 8, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    let ar = ApiResource {
        group: "ray.io".into(),
        version: "v1".into(),
        api_version: "ray.io/v1".into(),
        kind: "RayJob".into(),
        plural: "rayjobs".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), &c.namespace, &ar);
    let result = async {
        // The head (1 GPU) and 3 workers × 2 GPUs: 7 of 8.
        api.create(&PostParams::default(), &rayjob("tune", 3)?).await?;
        let wl = c.wait_workload_condition("rayjob-tune", "Admitted", "True", T).await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("head".to_string(), 1), ("gpu".to_string(), 3)]);
        let started = wait_for("RayJob resumed", T, || async {
            let v = serde_json::to_value(api.get("tune").await?)?;
            Ok((v["spec"]["suspend"] == json!(false)).then_some(v))
        })
        .await?;
        let spec = &started["spec"]["rayClusterSpec"];
        ensure_eq!(
            spec["headGroupSpec"]["template"]["spec"]["nodeSelector"],
            json!({"pool": "cpu", "sluice.dev/e2e-gpu": f})
        );
        ensure_eq!(
            spec["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"],
            json!({"sluice.dev/e2e-gpu": f})
        );
        // 1 + 5 × 2 GPUs more: waits (7 + 11 > 8), never resumed.
        api.create(&PostParams::default(), &rayjob("sweep", 5)?).await?;
        c.wait_workload_condition("rayjob-sweep", "QuotaReserved", "False", T)
            .await?;
        // A higher-priority 2-GPU Job: 7 + 2 > 8, the RayJob is preempted,
        // suspended and both templates put back; readmitted once the Job
        // finishes.
        c.urgent_job(1, 2).await?;
        ensure_eq!(c.wait_reason("rayjob-tune", "Evicted", T).await?, "Preempted");
        wait_for("RayJob suspended and restored", T, || async {
            let v = serde_json::to_value(api.get("tune").await?)?;
            let spec = &v["spec"]["rayClusterSpec"];
            let done = v["spec"]["suspend"] == json!(true)
                && spec["headGroupSpec"]["template"]["spec"]["nodeSelector"] == json!({"pool": "cpu"})
                && spec["workerGroupSpecs"][0]["template"]["spec"]
                    .get("nodeSelector")
                    .is_none_or(Value::is_null);
            Ok(done.then_some(()))
        })
        .await?;
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        c.wait_suspended("urgent", false, T).await?;
        c.mark_pods("urgent", 1, "Succeeded").await?;
        c.wait_workload_condition("rayjob-tune", "Admitted", "True", T).await?;
        // KubeRay reports the first one complete: it finishes, its quota
        // goes, and the second is still too large for the queue.
        api.patch_status(
            "tune",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}})),
        )
        .await?;
        ensure_eq!(c.wait_reason("rayjob-tune", "Finished", T).await?, "Succeeded");
        let sweep = serde_json::to_value(api.get("sweep").await?)?;
        ensure_eq!(sweep["spec"]["suspend"], json!(true));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
