//! End-to-end: what users and auditors read from the API. Workloads never
//! show more admitted than the quota, and the reasons they give are true.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test api_view -- --ignored --test-threads=1
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use kube::api::ListParams;
use serde_json::json;
use sluice_e2e::audit::QuotaAudit;
use sluice_e2e::cluster::Cluster;

const T: Duration = Duration::from_secs(60);

/// Jobs finish one after another into a full queue: each finished Job's
/// quota goes to the next one at once. Every Workload event is watched,
/// and after each one the GPUs held by the Workloads of the ClusterQueue
/// (`QuotaReserved`, not `Finished`, with an admission) are summed: the
/// sum never goes above the 8 GPUs of the quota.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn workloads_never_show_more_admitted_than_the_quota_while_jobs_finish_into_a_full_queue() -> Result<()> {
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 8, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    let audit = QuotaAudit::start(c.client.clone(), &c.namespace, BTreeMap::from([(cq.clone(), 8)]));
    c.start_controller(&[]).await?;
    let result = async {
        let n = 16;
        for i in 0..n {
            c.job(&format!("j{i:02}"), "team", 1, 4, &[], true).await?;
        }
        // Plays the kubelet: every running Job's pod succeeds as soon as
        // it exists, so each finish frees quota the next Job takes.
        let start = Instant::now();
        loop {
            ensure!(start.elapsed() < 4 * T, "not every Job finished in {:?}", 4 * T);
            let jobs = c.jobs().list(&ListParams::default()).await?.items;
            let complete = jobs.iter().filter(|j| condition_true(j, "Complete")).count();
            if complete == n {
                break;
            }
            for j in &jobs {
                let running = j.spec.as_ref().and_then(|s| s.suspend) == Some(false);
                let name = j.metadata.name.clone().unwrap_or_default();
                if running && !condition_true(j, "Complete") && !c.job_pods(&name).await?.is_empty() {
                    c.mark_pods(&name, 1, "Succeeded").await?;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The last Workload events (the last Finished) come in.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let seen = audit.seen();
        eprintln!(
            "{} Workload events watched; most GPUs held at once in {cq}: {:?}",
            seen.events,
            seen.most.get(&cq)
        );
        ensure!(
            seen.over.is_empty(),
            "the Workloads showed more than the 8-GPU quota {} times: {:?}",
            seen.over.len(),
            seen.over
        );
        ensure!(
            seen.most.get(&cq) == Some(&8),
            "two Jobs at a time held the queue: {:?}",
            seen.most
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    drop(audit);
    c.cleanup().await?;
    result
}

/// A Job that may run with fewer pods (`sluice.dev/min-parallelism: 3` of
/// 8) waits in a 4-GPU queue while 2 GPUs are free: it is told what its
/// minimum needs, not that it exceeds what the queue can ever admit, and is
/// admitted with 4 once the other Job finishes.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_job_with_a_minimum_count_is_explained_at_its_minimum_and_admitted_reduced() -> Result<()> {
    use sluice_e2e::cluster::wait_for;
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 4, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    c.start_controller(&["--explain-after=0s"]).await?;
    let result = async {
        c.job("other", "team", 1, 2, &[], true).await?;
        c.wait_condition("other", "Admitted", "True", T).await?;
        let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "elastic", "labels": {"sluice.dev/queue": "team"},
                         "annotations": {"sluice.dev/min-parallelism": "3"}},
            "spec": {"parallelism": 8, "completions": 8, "suspend": true, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
        }))?;
        c.jobs().create(&Default::default(), &job).await?;
        let message = wait_for("job-elastic explained", T, || async {
            let wl = c.workloads().get_opt("job-elastic").await?;
            Ok(wl
                .and_then(|w| w.status)
                .and_then(|s| s.condition("QuotaReserved").cloned())
                .filter(|q| q.status == "False" && q.reason != "Queued" && q.reason != "Pending")
                .map(|q| format!("{}: {}", q.reason, q.message)))
        })
        .await?;
        eprintln!("job-elastic: {message}");
        ensure!(
            message.starts_with("InsufficientQuota: ")
                && message.contains("needs at least 3 nvidia.com/gpu (up to 8), 2 free of 4 nominal"),
            "unexpected explanation: {message}"
        );
        c.mark_pods("other", 1, "Succeeded").await?;
        let wl = c.wait_condition("elastic", "Admitted", "True", T).await?;
        let count = wl
            .status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| a.pod_set_assignments[0].count);
        ensure!(count == Some(4), "admitted with {count:?} pods, not the 4 that fit");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

fn condition_true(job: &k8s_openapi::api::batch::v1::Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Without the webhook, on a server without CEL (1.24): a negative quota
/// or limit is refused by the API server itself (the CRD's schema), with
/// the field; quantities as people write them are taken.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_negative_quota_is_refused_by_the_crd_schema() -> Result<()> {
    use kube::api::{Api, PostParams};
    use sluice_api::v1alpha1::ClusterQueue;
    let c = Cluster::start().await?;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    let queue = |name: &str, resource: serde_json::Value| -> Result<ClusterQueue> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue",
            "metadata": {"name": c.name(name)},
            "spec": {"namespaceSelector": {}, "cohort": "co", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100", "resources": [resource]}]}]}
        }))?)
    };
    let mut created = Vec::new();
    let result = async {
        for (name, field, resource) in [
            (
                "neg",
                "nominalQuota",
                json!({"name": "nvidia.com/gpu", "nominalQuota": "-8"}),
            ),
            (
                "negint",
                "nominalQuota",
                json!({"name": "nvidia.com/gpu", "nominalQuota": -8}),
            ),
            (
                "negborrow",
                "borrowingLimit",
                json!({"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "-1"}),
            ),
            (
                "neglend",
                "lendingLimit",
                json!({"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "-500m"}),
            ),
        ] {
            let err = api
                .create(&PostParams::default(), &queue(name, resource)?)
                .await
                .err()
                .map(|e| e.to_string());
            let said = err
                .as_deref()
                .and_then(|e| e.split(" (Status").next())
                .unwrap_or_default();
            eprintln!("{name}: {said}");
            ensure!(
                said.contains(&format!("spec.resourceGroups.flavors.resources.{field}: Invalid value")),
                "{name} was not refused by the schema: {err:?}"
            );
        }
        for (name, q) in [
            ("int", json!(16)),
            ("bin", json!("512Gi")),
            ("milli", json!("500m")),
            ("plus", json!("+2")),
        ] {
            api.create(
                &PostParams::default(),
                &queue(name, json!({"name": "nvidia.com/gpu", "nominalQuota": q}))?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("{name} ({q}) refused: {e}"))?;
            created.push(c.name(name));
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    for name in created {
        let _ = api.delete(&name, &Default::default()).await;
    }
    result
}

/// Without the webhook, on a server without CEL (1.24): a `borrowingLimit`
/// or `lendingLimit` without a cohort (a Cohort's without a parent), and
/// preemption settings that do not go together, are refused by the API
/// server itself (the CRD's `anyOf` rules), naming the field to set
/// (`spec.cohort: Required value`); the same with the cohort, or with
/// settings that go together, are taken.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn limits_without_a_cohort_are_refused_by_the_crd_schema() -> Result<()> {
    use kube::api::{Api, PostParams};
    use sluice_api::v1alpha1::{ClusterQueue, Cohort};
    let c = Cluster::start().await?;
    let queues: Api<ClusterQueue> = Api::all(c.client.clone());
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    let groups = |limit: &str| {
        json!([{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "8", limit: "4"}]}]}])
    };
    let queue = |name: &str, spec: serde_json::Value| -> Result<ClusterQueue> {
        let mut spec = spec;
        spec["namespaceSelector"] = json!({});
        Ok(serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "ClusterQueue", "metadata": {"name": c.name(name)}, "spec": spec
        }))?)
    };
    let cohort = |name: &str, spec: serde_json::Value| -> Result<Cohort> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "sluice.dev/v1alpha1", "kind": "Cohort", "metadata": {"name": c.name(name)}, "spec": spec
        }))?)
    };
    let said = |r: Result<(), kube::Error>| -> Option<String> {
        r.err()
            .map(|e| e.to_string().split(" (Status").next().unwrap_or_default().to_string())
    };
    let mut created_queues = Vec::new();
    let mut created_cohorts = Vec::new();
    let result = async {
        for (name, spec, field) in [
            ("borrow", json!({"resourceGroups": groups("borrowingLimit")}), "spec.cohort"),
            ("lend", json!({"resourceGroups": groups("lendingLimit")}), "spec.cohort"),
            (
                "reclaim",
                json!({"cohort": "co", "preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}}),
                "spec.preemption.reclaimWithinCohort",
            ),
            (
                "threshold",
                json!({"cohort": "co", "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"maxPriorityThreshold": 10}}}),
                "spec.preemption.borrowWithinCohort.policy",
            ),
        ] {
            let err = said(queues.create(&PostParams::default(), &queue(name, spec)?).await.map(drop));
            eprintln!("ClusterQueue {name}: {err:?}");
            ensure!(
                err.as_deref().is_some_and(|e| e.contains(field)),
                "ClusterQueue {name} was not refused at {field}: {err:?}"
            );
        }
        let err = said(
            cohorts
                .create(&PostParams::default(), &cohort("root", json!({"resourceGroups": groups("borrowingLimit")}))?)
                .await
                .map(drop),
        );
        eprintln!("Cohort root: {err:?}");
        ensure!(
            err.as_deref().is_some_and(|e| e.contains("spec.parent")),
            "Cohort root was not refused at spec.parent: {err:?}"
        );
        for (name, spec) in [
            ("withcohort", json!({"cohort": "co", "resourceGroups": groups("borrowingLimit")})),
            (
                "together",
                json!({"cohort": "co", "preemption": {"reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10}}}),
            ),
        ] {
            queues
                .create(&PostParams::default(), &queue(name, spec)?)
                .await
                .map_err(|e| anyhow::anyhow!("ClusterQueue {name} refused: {e}"))?;
            created_queues.push(c.name(name));
        }
        cohorts
            .create(
                &PostParams::default(),
                &cohort("child", json!({"parent": "org", "resourceGroups": groups("lendingLimit")}))?,
            )
            .await
            .map_err(|e| anyhow::anyhow!("Cohort child refused: {e}"))?;
        created_cohorts.push(c.name("child"));
        Ok::<_, anyhow::Error>(())
    }
    .await;
    for name in created_queues {
        let _ = queues.delete(&name, &Default::default()).await;
    }
    for name in created_cohorts {
        let _ = cohorts.delete(&name, &Default::default()).await;
    }
    result
}

/// `kubectl get clusterqueues` (the server's table) shows whether a queue
/// is active and why not: a `lendingLimit` above the nominal quota (which
/// neither the schema nor CEL can refuse; only the webhook, not running
/// here) shows `False` and its reason.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn kubectl_get_shows_an_inactive_queue_as_inactive_with_its_reason() -> Result<()> {
    let mut c = Cluster::start().await?;
    let f = c.flavor("a100").await?;
    let bad = c
        .cluster_queue(
            "overlend",
            json!({"cohort": c.name("co"), "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "16"}]}]}]}),
        )
        .await?;
    let good = c.gpu_queue("fine", &f, 8, None, json!({})).await?;
    c.start_controller(&[]).await?;
    let result = async {
        let row = |name: String| {
            let client = c.client.clone();
            async move {
                let req = http::Request::get(format!("/apis/sluice.dev/v1alpha1/clusterqueues/{name}"))
                    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                    .body(Vec::new())?;
                let table: serde_json::Value = serde_json::from_str(&client.request_text(req).await?)?;
                let columns: Vec<String> = table["columnDefinitions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect();
                let cells = table["rows"][0]["cells"].as_array().cloned().unwrap_or_default();
                Ok::<_, anyhow::Error>(
                    columns
                        .into_iter()
                        .zip(cells)
                        .collect::<BTreeMap<String, serde_json::Value>>(),
                )
            }
        };
        let shown = sluice_e2e::cluster::wait_for("the invalid queue's Active column", T, || async {
            let r = row(bad.clone()).await?;
            Ok((r.get("Active") == Some(&json!("False"))).then_some(r))
        })
        .await?;
        eprintln!("kubectl get clusterqueues {bad}: {shown:?}");
        ensure!(shown["Reason"] == json!("InvalidClusterQueue"), "{shown:?}");
        let fine = sluice_e2e::cluster::wait_for("the valid queue's Active column", T, || async {
            let r = row(good.clone()).await?;
            Ok((r.get("Active") == Some(&json!("True"))).then_some(r))
        })
        .await?;
        ensure!(fine["Reason"] == json!("Ready"), "{fine:?}");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}
