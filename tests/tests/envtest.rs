//! The harness's own control plane (`KUBEBUILDER_ASSETS`): it starts,
//! serves on loopback with the admin identity it made, runs the job
//! controller when `kube-controller-manager` is there, and reports Job
//! `status.ready` (the JobReadyPods gate on servers before 1.29).
//!
//! ```text
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test envtest -- --ignored
//! ```
//!
//! With `SLUICE_E2E_KUBECONFIG` set the suite runs against that cluster:
//! this test then skips, and says why.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use sluice_e2e::cluster::{client, wait_for};
use sluice_e2e::envtest;

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS (etcd, kube-apiserver, kube-controller-manager)"]
async fn the_harness_starts_a_control_plane_of_its_own() -> Result<()> {
    if let Some(why) = envtest::own_plane_skipped_here() {
        eprintln!("{why}");
        return Ok(());
    }
    let plane = envtest::shared().context("KUBEBUILDER_ASSETS is not set")??;
    ensure!(plane.server.starts_with("https://127.0.0.1:"), "{}", plane.server);
    let client = client().await?;
    let version = client.apiserver_version().await?;
    ensure!(
        version.minor.trim_end_matches('+') == plane.minor.to_string(),
        "{version:?} vs {}",
        plane.minor
    );

    let ns = format!("envtest-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let result = job_gets_pods_and_ready(&client, &ns, plane.controller_manager).await;
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    result
}

async fn job_gets_pods_and_ready(client: &kube::Client, ns: &str, controller_manager: bool) -> Result<()> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "probe"},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]
        }}}
    }))?;
    jobs.create(&PostParams::default(), &job).await?;
    if !controller_manager {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_for(
        "the job controller to create a pod",
        Duration::from_secs(60),
        || async { Ok((!pods.list(&ListParams::default()).await?.items.is_empty()).then_some(())) },
    )
    .await?;
    wait_for("Job status.ready", Duration::from_secs(60), || async {
        Ok(jobs.get("probe").await?.status.and_then(|s| s.ready))
    })
    .await?;
    Ok(())
}
