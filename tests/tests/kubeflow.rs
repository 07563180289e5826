//! End-to-end tests of Kubeflow training jobs (`kubeflow.org/v1`
//! PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, `kubeflow.org/v2beta1`
//! MPIJob) against a real API server:
//! the test installs minimal CRDs (`tests/crds/kubeflow.org_*.yaml`) before
//! the controller starts (it finds the kinds by discovery) and plays the
//! training operator where one is needed (its conditions); no pods exist.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test kubeflow -- --ignored --test-threads=1
//! ```

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sluice_e2e::cluster::{Cluster, install_crd_file, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);
const GPU: &str = "nvidia.com/gpu";

fn resource(version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "kubeflow.org".into(),
        version: version.into(),
        api_version: format!("kubeflow.org/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn cluster(gpus: u32) -> Result<(Cluster, String)> {
    let mut c = Cluster::start().await?;
    install_crd_file(
        &c.client,
        "kubeflow.org_pytorchjobs.yaml",
        "kubeflow.org/v1",
        "pytorchjobs",
    )
    .await?;
    install_crd_file(
        &c.client,
        "kubeflow.org_mpijobs.yaml",
        "kubeflow.org/v2beta1",
        "mpijobs",
    )
    .await?;
    for (file, plural) in [
        ("kubeflow.org_tfjobs.yaml", "tfjobs"),
        ("kubeflow.org_xgboostjobs.yaml", "xgboostjobs"),
        ("kubeflow.org_paddlejobs.yaml", "paddlejobs"),
        ("kubeflow.org_jaxjobs.yaml", "jaxjobs"),
    ] {
        install_crd_file(&c.client, file, "kubeflow.org/v1", plural).await?;
    }
    let f = c.flavor("a100").await?;
    let cq = c
        .gpu_queue("cq", &f, gpus, None, json!({"withinClusterQueue": "LowerPriority"}))
        .await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&[]).await?;
    Ok((c, f))
}

fn pod(gpus: u32, selector: Value) -> Value {
    json!({"spec": {"nodeSelector": selector, "containers": [{"name": "main", "image": "busybox",
        "resources": {"limits": {GPU: gpus.to_string()}}}]}})
}

fn role(obj: &Value, field: &str, role: &str) -> Value {
    obj["spec"][field][role]["template"]["spec"].clone()
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_pytorchjob_is_admitted_whole_injected_per_role_preempted_restored_and_finished_and_a_larger_one_never_runs()
-> Result<()> {
    let (mut c, f) = cluster(16).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &resource("v1", "PyTorchJob", "pytorchjobs"),
    );
    let result = async {
        let pj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "bert", "labels": {"sluice.dev/queue": "team"}},
            "spec": {"runPolicy": {"suspend": true, "cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": pod(1, json!({"team": "ml"}))},
                "Worker": {"replicas": 4, "template": pod(2, json!(null))}
            }}
        }))?;
        api.create(&PostParams::default(), &pj).await?;
        let wl = c
            .wait_workload_condition("pytorchjob-bert", "Admitted", "True", T)
            .await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("master".to_string(), 1), ("worker".to_string(), 4)]);
        let get = || async { Ok::<_, anyhow::Error>(serde_json::to_value(api.get("bert").await?)?) };
        let started = wait_for("PyTorchJob resumed", T, || async {
            let v = get().await?;
            Ok((v["spec"]["runPolicy"]["suspend"] == json!(false)).then_some(v))
        })
        .await?;
        ensure_eq!(started["spec"]["runPolicy"]["cleanPodPolicy"], json!("None"));
        let field = "pytorchReplicaSpecs";
        ensure_eq!(
            role(&started, field, "Master")["nodeSelector"],
            json!({"team": "ml", "sluice.dev/e2e-gpu": f})
        );
        ensure_eq!(
            role(&started, field, "Worker")["nodeSelector"],
            json!({"sluice.dev/e2e-gpu": f})
        );

        // A higher-priority 8-GPU Job: 9 + 8 > 16, the PyTorchJob is preempted.
        c.urgent_job(4, 2).await?;
        ensure_eq!(c.wait_reason("pytorchjob-bert", "Evicted", T).await?, "Preempted");
        let restored = wait_for("PyTorchJob suspended and restored", T, || async {
            let v = get().await?;
            let done = v["spec"]["runPolicy"]["suspend"] == json!(true)
                && v["metadata"]["annotations"]
                    .get("sluice.dev/original-scheduling")
                    .is_none();
            Ok(done.then_some(v))
        })
        .await?;
        ensure_eq!(role(&restored, field, "Master")["nodeSelector"], json!({"team": "ml"}));
        ensure!(
            role(&restored, field, "Worker")
                .get("nodeSelector")
                .is_none_or(Value::is_null),
            "{}",
            role(&restored, field, "Worker")
        );
        c.wait_condition("urgent", "Admitted", "True", T).await?;

        // The Job finishes; the PyTorchJob is admitted again and succeeds
        // (the test plays the training operator).
        c.wait_suspended("urgent", false, T).await?;
        c.mark_pods("urgent", 4, "Succeeded").await?;
        c.wait_workload_condition("pytorchjob-bert", "Admitted", "True", T)
            .await?;
        api.patch_status(
            "bert",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{"type": "Succeeded", "status": "True",
                "reason": "PyTorchJobSucceeded", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await?;
        ensure_eq!(c.wait_reason("pytorchjob-bert", "Finished", T).await?, "Succeeded");
        // 1 + 8 × 2 = 17 GPUs in the 16-GPU queue: never partly admitted.
        let mut huge = pj.clone();
        huge.metadata.name = Some("huge".into());
        huge.data["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(8);
        api.create(&PostParams::default(), &huge).await?;
        let wl = c
            .wait_workload_condition("pytorchjob-huge", "QuotaReserved", "False", T)
            .await?;
        let pending = wl
            .status
            .as_ref()
            .and_then(|s| s.pending.as_ref())
            .context("not explained")?;
        ensure_eq!(pending.reason, "ExceedsQuota");
        let v = serde_json::to_value(api.get("huge").await?)?;
        ensure_eq!(v["spec"]["runPolicy"]["suspend"], json!(true));
        ensure!(
            v["metadata"]["annotations"]
                .get("sluice.dev/original-scheduling")
                .is_none(),
            "nothing injected"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn an_mpijob_created_running_is_held_admitted_preempted_restored_and_one_larger_than_its_queue_never_runs()
-> Result<()> {
    let (mut c, f) = cluster(8).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &resource("v2beta1", "MPIJob", "mpijobs"),
    );
    let result = async {
        let mpi = |name: &str, workers: u32| -> Result<DynamicObject> {
            Ok(serde_json::from_value(json!({
                "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"}},
                "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": pod(0, json!(null))},
                    "Worker": {"replicas": workers, "template": pod(2, json!(null))}
                }}
            }))?)
        };
        // No runPolicy, not suspended (no webhook here): held by the
        // controller, then admitted (6 GPUs of 8) and resumed.
        api.create(&PostParams::default(), &mpi("hvd", 3)?).await?;
        let wl = c.wait_workload_condition("mpijob-hvd", "Admitted", "True", T).await?;
        let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
        ensure_eq!(sets, vec![("launcher".to_string(), 1), ("worker".to_string(), 3)]);
        let started = wait_for("MPIJob resumed on its flavor", T, || async {
            let v = serde_json::to_value(api.get("hvd").await?)?;
            let ok = v["spec"]["runPolicy"]["suspend"] == json!(false)
                && role(&v, "mpiReplicaSpecs", "Worker")["nodeSelector"]["sluice.dev/e2e-gpu"] == json!(f);
            Ok(ok.then_some(v))
        })
        .await?;
        ensure_eq!(started["spec"]["slotsPerWorker"], json!(2));
        // A higher-priority 4-GPU Job: 6 + 4 > 8, the MPIJob is preempted,
        // suspended, and its templates are put back.
        c.urgent_job(2, 2).await?;
        ensure_eq!(c.wait_reason("mpijob-hvd", "Evicted", T).await?, "Preempted");
        wait_for("MPIJob suspended and restored", T, || async {
            let v = serde_json::to_value(api.get("hvd").await?)?;
            let done = v["spec"]["runPolicy"]["suspend"] == json!(true)
                && role(&v, "mpiReplicaSpecs", "Worker")
                    .get("nodeSelector")
                    .is_none_or(Value::is_null)
                && v["metadata"]["annotations"]
                    .get("sluice.dev/original-scheduling")
                    .is_none();
            Ok(done.then_some(()))
        })
        .await?;
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        // 10 GPUs in an 8-GPU queue: pending, never resumed.
        api.create(&PostParams::default(), &mpi("big", 5)?).await?;
        let wl = c
            .wait_workload_condition("mpijob-big", "QuotaReserved", "False", T)
            .await?;
        let pending = wl
            .status
            .as_ref()
            .and_then(|s| s.pending.as_ref())
            .context("not explained")?;
        ensure_eq!(pending.reason, "ExceedsQuota");
        let big = serde_json::to_value(api.get("big").await?)?;
        ensure_eq!(big["spec"]["runPolicy"]["suspend"], json!(true));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// The four training-operator kinds added as one file each
/// (`crates/kinds/src/{tfjob,xgboostjob,paddlejob,jaxjob}.rs`), one after
/// another in an 8-GPU queue, each of 6 GPUs: held (created running,
/// without the webhook), admitted whole with a pod set per role, resumed
/// with its flavor in every role, and finished when its operator says it
/// succeeded (the next one is admitted only once that quota is released);
/// then a TFJob is preempted, suspended and its templates put back.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn tfjobs_xgboostjobs_paddlejobs_and_jaxjobs_are_held_admitted_whole_finished_and_preempted_restored()
-> Result<()> {
    let (mut c, f) = cluster(8).await?;
    let result = async {
        // (kind, plural, its map of roles, its roles and their replicas)
        type Kind<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, u32)]);
        let kinds: [Kind; 4] = [
            ("TFJob", "tfjobs", "tfReplicaSpecs", &[("Chief", 1), ("Worker", 2)]),
            (
                "XGBoostJob",
                "xgboostjobs",
                "xgbReplicaSpecs",
                &[("Master", 1), ("Worker", 2)],
            ),
            ("PaddleJob", "paddlejobs", "paddleReplicaSpecs", &[("Worker", 3)]),
            ("JAXJob", "jaxjobs", "jaxReplicaSpecs", &[("Worker", 3)]),
        ];
        let make = |kind: &str, field: &str, name: &str, roles: &[(&str, u32)]| -> Result<DynamicObject> {
            let specs: serde_json::Map<String, Value> = roles
                .iter()
                .map(|(r, n)| (r.to_string(), json!({"replicas": n, "template": pod(2, json!(null))})))
                .collect();
            Ok(serde_json::from_value(json!({
                "apiVersion": "kubeflow.org/v1", "kind": kind,
                "metadata": {"name": name, "labels": {"sluice.dev/queue": "team"}},
                "spec": {field: specs}
            }))?)
        };
        for (kind, plural, field, roles) in kinds {
            let api: Api<DynamicObject> =
                Api::namespaced_with(c.client.clone(), &c.namespace, &resource("v1", kind, plural));
            let workload = format!("{}-run", kind.to_ascii_lowercase());
            api.create(&PostParams::default(), &make(kind, field, "run", roles)?)
                .await?;
            let wl = c.wait_workload_condition(&workload, "Admitted", "True", T).await?;
            let sets: Vec<(String, i32)> = wl.spec.pod_sets.iter().map(|p| (p.name.clone(), p.count)).collect();
            let want: Vec<(String, i32)> = roles.iter().map(|(r, n)| (r.to_ascii_lowercase(), *n as i32)).collect();
            ensure_eq!(sets, want, "{kind}");
            wait_for(&format!("{kind} resumed on its flavor"), T, || async {
                let v = serde_json::to_value(api.get("run").await?)?;
                let ok = v["spec"]["runPolicy"]["suspend"] == json!(false)
                    && roles
                        .iter()
                        .all(|(r, _)| role(&v, field, r)["nodeSelector"]["sluice.dev/e2e-gpu"] == json!(f));
                Ok(ok.then_some(()))
            })
            .await?;
            let done = json!({"status": {"conditions": [{"type": "Succeeded", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
            api.patch_status("run", &PatchParams::default(), &Patch::Merge(&done))
                .await?;
            c.wait_workload_condition(&workload, "Finished", "True", T).await?;
        }
        // A TFJob preempted by a higher-priority 4-GPU Job (6 + 4 > 8):
        // suspended, and its templates put back.
        let api: Api<DynamicObject> =
            Api::namespaced_with(c.client.clone(), &c.namespace, &resource("v1", "TFJob", "tfjobs"));
        api.create(
            &PostParams::default(),
            &make("TFJob", "tfReplicaSpecs", "late", &[("Chief", 1), ("Worker", 2)])?,
        )
        .await?;
        c.wait_workload_condition("tfjob-late", "Admitted", "True", T).await?;
        c.urgent_job(2, 2).await?;
        ensure_eq!(c.wait_reason("tfjob-late", "Evicted", T).await?, "Preempted");
        wait_for("TFJob suspended and restored", T, || async {
            let v = serde_json::to_value(api.get("late").await?)?;
            let done = v["spec"]["runPolicy"]["suspend"] == json!(true)
                && ["Chief", "Worker"].iter().all(|r| {
                    role(&v, "tfReplicaSpecs", r)
                        .get("nodeSelector")
                        .is_none_or(Value::is_null)
                })
                && v["metadata"]["annotations"]
                    .get("sluice.dev/original-scheduling")
                    .is_none();
            Ok(done.then_some(()))
        })
        .await?;
        c.wait_condition("urgent", "Admitted", "True", T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
