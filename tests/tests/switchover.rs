//! End-to-end: switching over from Kueue with running jobs kept. Kueue's
//! Workload CRD is installed (its shape; no Kueue controller runs: the
//! test writes what Kueue would), a Job labelled for Kueue's queue runs
//! with a Kueue Workload holding 6 of the 8 GPUs of the ClusterQueue Sluice
//! has under the same name. Sluice counts them, admits new Jobs only into
//! what is left, never suspends Kueue's Job, and gives the GPUs out once
//! Kueue lets go. A Kueue admission into a ClusterQueue Sluice lacks is
//! reported on it. `sluice trace record` then turns both kinds of
//! Workloads into a simulator trace.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test switchover -- --ignored --test-threads=1
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::json;
use sluice_e2e::audit::QuotaAudit;
use sluice_e2e::cluster::{Cluster, GPU, install_crd_file, wait_for};

const T: Duration = Duration::from_secs(60);

fn kueue_workloads(c: &Cluster) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", "Workload");
    Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "workloads"),
    )
}

/// What Kueue writes for a Job it admitted: a Workload owned by the Job,
/// its status reserving `gpus` GPUs of `flavor` in `cluster_queue`.
async fn kueue_admitted(
    c: &Cluster,
    job: &k8s_openapi::api::batch::v1::Job,
    cluster_queue: &str,
    flavor: &str,
    gpus: u32,
) -> Result<String> {
    let job_name = job.metadata.name.clone().context("job name")?;
    let name = format!("job-{job_name}-8f3d2");
    let wl: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": name, "namespace": c.namespace,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                 "uid": job.metadata.uid, "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"queueName": "user-queue", "priority": 0,
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "main", "image": "busybox", "resources": {"requests": {GPU: gpus.to_string()}}}]}}}]}
    }))?;
    let api = kueue_workloads(c);
    api.create(&PostParams::default(), &wl).await?;
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)?
        .to_string();
    let status = json!({"status": {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {GPU: flavor}, "resourceUsage": {GPU: gpus.to_string()}}]},
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "by Kueue", "lastTransitionTime": now},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "by Kueue", "lastTransitionTime": now}]}});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(name)
}

/// Kueue finishes it.
async fn kueue_finished(c: &Cluster, name: &str) -> Result<()> {
    let api = kueue_workloads(c);
    let mut wl = api.get(name).await?;
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)?
        .to_string();
    let conditions = wl.data["status"]["conditions"].as_array_mut().context("conditions")?;
    conditions.push(json!({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully", "lastTransitionTime": now}));
    let status = json!({"status": {"conditions": conditions}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

fn reason(wl: &sluice_api::v1alpha1::Workload) -> String {
    wl.status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .map(|q| format!("{} {}: {}", q.status, q.reason, q.message))
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn running_kueue_jobs_are_counted_new_jobs_get_only_what_is_left_and_their_gpus_come_back_when_kueue_lets_go()
-> Result<()> {
    let mut c = Cluster::start().await?;
    install_crd_file(
        &c.client,
        "kueue.x-k8s.io_workloads.yaml",
        "kueue.x-k8s.io/v1beta1",
        "workloads",
    )
    .await?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, 8, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    let result = async {
        // Kueue's Job: running, admitted by Kueue with 6 GPUs.
        let job: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "kueue-train", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
            "spec": {"parallelism": 1, "completions": 1, "suspend": false, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"limits": {GPU: "6"}}}]}}}
        }))?;
        let job = c.jobs().create(&PostParams::default(), &job).await?;
        let kueue_wl = kueue_admitted(&c, &job, &cq, &f, 6).await?;
        // And one Kueue admitted into a ClusterQueue Sluice does not have.
        let other: k8s_openapi::api::batch::v1::Job = serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "kueue-elsewhere", "labels": {"kueue.x-k8s.io/queue-name": "research"}},
            "spec": {"parallelism": 1, "completions": 1, "suspend": false, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "resources": {"limits": {GPU: "1"}}}]}}}
        }))?;
        let other = c.jobs().create(&PostParams::default(), &other).await?;
        let elsewhere = kueue_admitted(&c, &other, "research-not-in-sluice", &f, 1).await?;

        let audit = QuotaAudit::start(c.client.clone(), &c.namespace, BTreeMap::from([(cq.clone(), 2)]));
        c.start_controller(&["--explain-after=0s"]).await?;
        c.job("a", "team", 1, 2, &[], true).await?;
        c.wait_condition("a", "Admitted", "True", T).await?;
        c.job("b", "team", 1, 2, &[], true).await?;
        let waiting = wait_for("job-b explained", T, || async {
            let wl = c.workloads().get_opt("job-b").await?;
            Ok(wl
                .filter(|w| reason(w).starts_with("False InsufficientQuota"))
                .map(|w| reason(&w)))
        })
        .await?;
        eprintln!("while Kueue holds 6 GPUs: job-b {waiting}");
        ensure!(
            waiting.contains("needs 2 nvidia.com/gpu, 0 free of 8 nominal"),
            "{waiting}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let seen = audit.seen();
        ensure!(
            seen.over.is_empty(),
            "Sluice admitted past what Kueue left: {:?}",
            seen.over
        );
        ensure!(
            !c.job_suspended("kueue-train").await?,
            "Sluice suspended Kueue's running Job"
        );
        ensure!(
            !c.workload_of("b").await?.status.is_some_and(|s| s.holds_quota()),
            "job-b holds quota while Kueue holds 6 of 8 GPUs"
        );
        let events = c.events_about("Workload", &elsewhere, "KueueQuotaNotCounted").await?;
        ensure!(events == 1, "{events} KueueQuotaNotCounted Events on {elsewhere}");

        // Kueue lets go: its 6 GPUs are Sluice's to give.
        kueue_finished(&c, &kueue_wl).await?;
        c.wait_condition("b", "Admitted", "True", T).await?;
        let seen = audit.seen();
        eprintln!("most GPUs Sluice's Workloads held at once: {:?}", seen.most.get(&cq));
        ensure!(seen.admitted_twice().is_empty(), "{:?}", seen.admitted_twice());

        // Last hour's Workloads, Sluice's and Kueue's, as a simulator trace.
        let out = std::process::Command::new(sluice_e2e::cluster::sluice_bin())
            .args(["trace", "record", "--since", "1h"])
            .env("KUBECONFIG", sluice_e2e::cluster::kubeconfig_path())
            .output()?;
        let (trace, said) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        ensure!(out.status.success(), "sluice trace record: {said}");
        eprintln!("{said}");
        let ns = &c.namespace;
        for job in [format!("{ns}-job-a"), format!("{ns}-job-b"), format!("{ns}-{kueue_wl}")] {
            ensure!(
                trace.contains(&format!("- name: {job}\n")),
                "{job} not in the trace:\n{trace}"
            );
        }
        ensure!(
            said.contains(&format!("{ns}/user-queue: 2 workloads"))
                && said.contains(&format!("{ns}/team: 2 workloads")),
            "{said}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// `sluice import kueue`'s output is what the API server takes (the CRDs'
/// schemas, v1.24): every object of a Kueue sample, translated, is created.
#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn imported_kueue_queues_are_taken_by_the_api_server() -> Result<()> {
    let mut c = Cluster::start().await?;
    let (flavor, cohort, queue) = (c.name("imp-flavor"), c.name("imp-root"), c.name("imp-cq"));
    let sample = format!(
        "apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: {flavor}}}
spec:
  nodeLabels: {{gpu: h100}}
  nodeTaints: [{{key: nvidia.com/gpu, value: present, effect: NoSchedule}}]
  tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {{name: {cohort}}}
spec: {{fairSharing: {{weight: \"2\"}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {queue}}}
spec:
  cohortName: {cohort}
  flavorFungibility: {{whenCanBorrow: MayStopSearch}}
  preemption: {{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: {flavor}
      resources: [{{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 4}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{namespace: {ns}, name: user-queue}}
spec: {{clusterQueue: {queue}}}
",
        ns = c.namespace
    );
    let file = std::env::temp_dir().join(format!("kueue-{}.yaml", c.suffix));
    std::fs::write(&file, sample)?;
    let out = std::process::Command::new(sluice_e2e::cluster::sluice_bin())
        .args(["import", "kueue"])
        .arg(&file)
        .output()?;
    let _ = std::fs::remove_file(&file);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    ensure!(out.status.success(), "sluice import kueue: {said}");
    ensure!(
        said.contains("spec.flavorFungibility"),
        "the flavorFungibility difference is not said: {said}"
    );
    let yaml = String::from_utf8_lossy(&out.stdout).to_string();
    let result = async {
        from_cluster(&c, &flavor, &queue).await?;
        for doc in yaml.split("---\n").filter(|d| !d.trim().is_empty()) {
            let obj: DynamicObject = serde_saphyr::from_str(doc)?;
            let kind = obj.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let plural = format!("{}s", kind.to_lowercase());
            let gvk = GroupVersionKind::gvk("sluice.dev", "v1alpha1", &kind);
            let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
            let api: Api<DynamicObject> = match &obj.metadata.namespace {
                Some(ns) => Api::namespaced_with(c.client.clone(), ns, &ar),
                None => Api::all_with(c.client.clone(), &ar),
            };
            api.create(&PostParams::default(), &obj)
                .await
                .with_context(|| format!("the API server refused the imported {kind}:\n{doc}"))?;
            if obj.metadata.namespace.is_none() {
                c.track(&plural, obj.metadata.name.clone().unwrap_or_default());
            }
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// `sluice import kueue --from-cluster` reads the Kueue objects the
/// cluster holds (stand-in CRDs of kueue.x-k8s.io/v1beta1; Cohorts are not
/// served here and are skipped) and translates them.
async fn from_cluster(c: &Cluster, flavor: &str, queue: &str) -> Result<()> {
    for (file, plural) in [
        ("kueue.x-k8s.io_resourceflavors.yaml", "resourceflavors"),
        ("kueue.x-k8s.io_clusterqueues.yaml", "clusterqueues"),
        ("kueue.x-k8s.io_localqueues.yaml", "localqueues"),
    ] {
        install_crd_file(&c.client, file, "kueue.x-k8s.io/v1beta1", plural).await?;
    }
    let kueue = |kind: &str, plural: &str, ns: Option<&str>| {
        let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta1", kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
        match ns {
            Some(ns) => Api::<DynamicObject>::namespaced_with(c.client.clone(), ns, &ar),
            None => Api::<DynamicObject>::all_with(c.client.clone(), &ar),
        }
    };
    let (kflavor, kqueue) = (format!("k-{flavor}"), format!("k-{queue}"));
    for (kind, plural, ns, obj) in [
        (
            "ResourceFlavor",
            "resourceflavors",
            None,
            json!({"metadata": {"name": kflavor}, "spec": {"nodeLabels": {"gpu": "a100"}}}),
        ),
        (
            "ClusterQueue",
            "clusterqueues",
            None,
            json!({"metadata": {"name": kqueue}, "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": kflavor, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}),
        ),
        (
            "LocalQueue",
            "localqueues",
            Some(c.namespace.as_str()),
            json!({"metadata": {"name": "k-user-queue", "namespace": c.namespace}, "spec": {"clusterQueue": kqueue}}),
        ),
    ] {
        let mut obj = obj;
        obj["apiVersion"] = json!("kueue.x-k8s.io/v1beta1");
        obj["kind"] = json!(kind);
        kueue(kind, plural, ns)
            .create(&PostParams::default(), &serde_json::from_value(obj)?)
            .await?;
    }
    let out = std::process::Command::new(sluice_e2e::cluster::sluice_bin())
        .args(["import", "kueue", "--from-cluster"])
        .env("KUBECONFIG", sluice_e2e::cluster::kubeconfig_path())
        .output()?;
    let (yaml, said) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    ensure!(out.status.success(), "sluice import kueue --from-cluster: {said}");
    eprintln!("--from-cluster: {}", said.lines().last().unwrap_or_default());
    for name in [&kflavor, &kqueue, &"k-user-queue".to_string()] {
        ensure!(yaml.contains(&format!("name: {name}")), "{name} not imported:\n{yaml}");
    }
    // Unset in Kueue (no namespace, as in Sluice): kept unset, and said.
    ensure!(!yaml.contains("namespaceSelector"), "{yaml}");
    ensure!(said.contains("spec.namespaceSelector"), "{said}");
    for (kind, plural, ns, name) in [
        ("LocalQueue", "localqueues", Some(c.namespace.as_str()), "k-user-queue"),
        ("ClusterQueue", "clusterqueues", None, kqueue.as_str()),
        ("ResourceFlavor", "resourceflavors", None, kflavor.as_str()),
    ] {
        let _ = kueue(kind, plural, ns).delete(name, &Default::default()).await;
    }
    Ok(())
}
