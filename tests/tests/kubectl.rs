//! End-to-end tests of `kubectl sluice` (the `kubectl-sluice` binary next
//! to `sluice`, or `KUBECTL_SLUICE_BIN`) against a real API server: as the
//! admin, and as namespaced ServiceAccounts with only the built-in `view`
//! role (with Sluice's viewer ClusterRole aggregated into it, as the chart
//! installs it) or with nothing at all.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test kubectl -- --ignored --test-threads=1
//! ```
//!
//! With `SLUICE_RECORD_DIR` set, the objects the admin reads are written
//! there (the golden tests of `crates/kubectl` render such a recording).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use serde_json::{Value, json};
use sluice_api::v1alpha1::{ClusterQueue, LocalQueue, Workload};
use sluice_e2e::cluster::{Cluster, kubeconfig_path, sluice_bin, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);

fn plugin_bin() -> PathBuf {
    std::env::var_os("KUBECTL_SLUICE_BIN").map_or_else(|| sluice_bin().with_file_name("kubectl-sluice"), PathBuf::from)
}

/// Runs the plugin with `kubeconfig`: (exit code, stdout, stderr).
fn plugin(kubeconfig: &std::path::Path, args: &[&str]) -> Result<(i32, String, String)> {
    let out = Command::new(plugin_bin())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .output()
        .with_context(|| format!("running {}", plugin_bin().display()))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Its JSON output, after checking it exited 0.
fn plugin_json(kubeconfig: &std::path::Path, args: &[&str]) -> Result<Value> {
    let (code, out, err) = plugin(kubeconfig, args)?;
    ensure!(code == 0, "kubectl sluice {args:?} exited {code}: {err}");
    serde_json::from_str(&out).with_context(|| format!("kubectl sluice {args:?}: not JSON: {out}"))
}

/// A kubeconfig for ServiceAccount `name` of the namespace (a token from
/// the TokenRequest API), beside the admin's server and CA.
async fn service_account_kubeconfig(c: &Cluster, name: &str) -> Result<PathBuf> {
    let sas: Api<ServiceAccount> = Api::namespaced(c.client.clone(), &c.namespace);
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    sas.create(&PostParams::default(), &sa).await?;
    let token: Value = sas
        .create_subresource(
            "token",
            name,
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}),
        )
        .await?;
    let token = token["status"]["token"].as_str().context("no token")?.to_string();
    let admin = Kubeconfig::read_from(kubeconfig_path())?;
    let cluster = admin.clusters.first().context("no cluster")?.clone();
    let mut kc: Value = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [serde_json::to_value(&cluster)?],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster.name, "user": name, "namespace": c.namespace}}],
        "current-context": name
    });
    kc["clusters"][0]["name"] = json!(cluster.name);
    let path = std::env::temp_dir().join(format!("sluice-e2e-{}-{name}.kubeconfig", c.suffix));
    std::fs::write(&path, serde_json::to_string(&kc)?)?;
    Ok(path)
}

/// The chart's viewer ClusterRole (aggregated into `view`), and `view`
/// bound to ServiceAccount `sa` in the namespace.
async fn grant_view(c: &mut Cluster, sa: &str) -> Result<String> {
    let name = c.name("sluice-viewer");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["sluice.dev"], "resources": ["localqueues", "localqueues/status", "workloads", "workloads/status"], "verbs": ["get", "list", "watch"]}]
    }))?;
    Api::<ClusterRole>::all(c.client.clone())
        .create(&PostParams::default(), &role)
        .await?;
    let rb: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{sa}-view")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": c.namespace}]
    }))?;
    Api::<RoleBinding>::namespaced(c.client.clone(), &c.namespace)
        .create(&PostParams::default(), &rb)
        .await?;
    Ok(name)
}

/// Removes the viewer ClusterRole (cluster-scoped, if one was made) and
/// the test's objects.
async fn clean_up(c: &mut Cluster, viewer_role: Option<String>) -> Result<()> {
    if let Some(role) = viewer_role {
        let _ = Api::<ClusterRole>::all(c.client.clone())
            .delete(&role, &DeleteParams::default())
            .await;
    }
    c.cleanup().await
}

/// Writes what the admin reads to `SLUICE_RECORD_DIR`, if set.
async fn record(c: &Cluster) -> Result<()> {
    let Some(dir) = std::env::var_os("SLUICE_RECORD_DIR") else {
        return Ok(());
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let lp = ListParams::default();
    let cqs = Api::<ClusterQueue>::all(c.client.clone()).list(&lp).await?;
    let lqs = Api::<LocalQueue>::namespaced(c.client.clone(), &c.namespace)
        .list(&lp)
        .await?;
    let wls = Api::<Workload>::namespaced(c.client.clone(), &c.namespace)
        .list(&lp)
        .await?;
    std::fs::write(
        dir.join("clusterqueues.json"),
        serde_json::to_string_pretty(&cqs.items)?,
    )?;
    std::fs::write(dir.join("localqueues.json"), serde_json::to_string_pretty(&lqs.items)?)?;
    std::fs::write(dir.join("workloads.json"), serde_json::to_string_pretty(&wls.items)?)?;
    std::fs::write(dir.join("now.txt"), k8s_openapi::jiff::Timestamp::now().to_string())?;
    Ok(())
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn admins_and_viewers_see_queues_positions_reasons_and_estimates() -> Result<()> {
    let mut c = Cluster::start().await?;
    let mut viewer_role = None;
    let result = async {
        let f = c.flavor("a100").await?;
        let cq = c
            .gpu_queue("gpu", &f, 2, None, json!({"withinClusterQueue": "LowerPriority"}))
            .await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&["--positions-interval", "2s", "--explain-after", "0s"])
            .await?;
        c.job("running", "team", 1, 2, &[], true).await?;
        c.wait_suspended("running", false, T).await?;
        // Expected to run 30 minutes: the one waiting behind it starts then.
        c.jobs()
            .patch(
                "running",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"sluice.dev/expected-runtime": "30m"}}})),
            )
            .await?;
        c.job("waiting", "team", 1, 2, &[], true).await?;
        // Creation times have a resolution of a second: order them.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        c.job("behind", "team", 1, 1, &[], true).await?;
        let admin = kubeconfig_path();
        let ns = c.namespace.clone();
        // Positions and estimates arrive with the next refresh.
        let workloads = wait_for("estimates in kubectl sluice workloads", T, || {
            let (admin, ns) = (admin.clone(), ns.clone());
            async move {
                let v = plugin_json(&admin, &["workloads", "-n", &ns, "-o", "json"])?;
                let waiting = v
                    .as_array()
                    .and_then(|a| a.iter().find(|w| w["name"] == "job-waiting"))
                    .cloned();
                Ok(waiting.filter(|w| w.get("estimatedStart").is_some()).map(|_| v))
            }
        })
        .await?;
        let by_name = |n: &str| {
            workloads
                .as_array()
                .and_then(|a| a.iter().find(|w| w["name"] == n))
                .cloned()
        };
        let waiting = by_name("job-waiting").context("job-waiting")?;
        ensure_eq!(waiting["state"], "Pending");
        ensure_eq!(waiting["reason"], "InsufficientQuota");
        ensure_eq!(waiting["positionInLocalQueue"], 1);
        ensure_eq!(waiting["job"], "Job/waiting");
        let behind = by_name("job-behind").context("job-behind")?;
        ensure_eq!(behind["positionInLocalQueue"], 2);
        ensure_eq!(by_name("job-running").context("job-running")?["state"], "Admitted");
        // About 30 minutes from the running one's admission.
        let est: k8s_openapi::jiff::Timestamp = waiting["estimatedStart"].as_str().context("estimate")?.parse()?;
        let ahead = est.as_second() - k8s_openapi::jiff::Timestamp::now().as_second();
        ensure!(
            (25 * 60..=31 * 60).contains(&ahead),
            "estimated {ahead}s ahead, expected about 30 min"
        );

        let q = plugin_json(&admin, &["queues", "-o", "json"])?;
        let mine = q
            .as_array()
            .and_then(|a| a.iter().find(|x| x["name"] == cq.as_str()))
            .context("queue")?;
        ensure_eq!(mine["kind"], "ClusterQueue");
        ensure_eq!(mine["resources"][0]["nominal"], "2");
        ensure_eq!(mine["resources"][0]["inUse"], "2");
        ensure_eq!(
            (mine["pending"].clone(), mine["admitted"].clone()),
            (json!(2), json!(1))
        );
        let (code, why, err) = plugin(&admin, &["why", "waiting", "-n", &ns])?;
        ensure!(code == 0, "{err}");
        for needle in [
            "Workload ",
            "(Job/waiting)",
            "State:     Pending (InsufficientQuota)",
            "1st in its LocalQueue",
            "Why it waits:",
            "Quota of ClusterQueue",
            "Holding the quota of",
            "job-running",
        ] {
            ensure!(why.contains(needle), "why lacks {needle:?}:\n{why}");
        }
        let (code, table, _) = plugin(&admin, &["workloads", "-n", &ns])?;
        ensure!(
            code == 0 && table.starts_with("NAME ") && table.contains("in 2"),
            "{table}"
        );
        // The LocalQueue's status lists its pending workloads in order.
        let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), &ns);
        let listed = wait_for("the LocalQueue's pending list", T, || {
            let lqs = lqs.clone();
            async move {
                let q = lqs.get("team").await?;
                let names: Vec<String> = q
                    .status
                    .iter()
                    .flat_map(|s| s.pending.iter().map(|p| p.name.clone()))
                    .collect();
                Ok((names.len() == 2).then_some(names))
            }
        })
        .await?;
        ensure_eq!(listed, ["job-waiting", "job-behind"]);
        record(&c).await?;

        // A namespaced viewer: the LocalQueue's copy of the ClusterQueue.
        viewer_role = Some(grant_view(&mut c, "viewer").await?);
        let viewer = service_account_kubeconfig(&c, "viewer").await?;
        let q = wait_for("the view role aggregated", T, || {
            let viewer = viewer.clone();
            async move { Ok(plugin_json(&viewer, &["queues", "-o", "json"]).ok()) }
        })
        .await?;
        let lq = q.as_array().and_then(|a| a.first()).context("a LocalQueue")?;
        ensure_eq!(lq["kind"], "LocalQueue");
        ensure_eq!(lq["clusterQueue"], cq.as_str());
        ensure_eq!(lq["resources"][0]["nominal"], "2");
        ensure_eq!(lq["resources"][0]["inUse"], "2");
        ensure_eq!(lq["clusterQueuePending"], 2);
        let w = plugin_json(&viewer, &["workloads", "--pending", "-o", "json"])?;
        ensure_eq!(w.as_array().map(Vec::len), Some(2));
        ensure_eq!(w[0]["name"], "job-waiting");
        ensure!(w[0].get("estimatedStart").is_some(), "{w}");
        let (code, why, err) = plugin(&viewer, &["why", "job/waiting"])?;
        ensure!(code == 0, "{err}");
        ensure!(
            why.contains("1st in its LocalQueue") && why.contains("not shown: you may not list Workloads"),
            "{why}"
        );

        // No rights at all: one line naming what is missing.
        let nobody = service_account_kubeconfig(&c, "nobody").await?;
        let (code, out, err) = plugin(&nobody, &["workloads"])?;
        ensure_eq!(code, 1);
        ensure!(out.is_empty(), "{out}");
        ensure_eq!(err.lines().count(), 1, "{err}");
        ensure!(
            err.starts_with(&format!(
                "error: forbidden: you may not list localqueues.sluice.dev in namespace {ns}"
            )),
            "{err}"
        );

        // stop / resume change admission.
        let (code, out, err) = plugin(&admin, &["stop", "team", "-n", &ns])?;
        ensure!(code == 0 && out.contains("stopped (Hold)"), "{out}{err}");
        c.mark_pods("running", 1, "Succeeded").await?;
        c.wait_condition("running", "Finished", "True", T).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        ensure!(
            c.job_suspended("waiting").await?,
            "admitted while its LocalQueue is stopped"
        );
        let (code, out, _) = plugin(&admin, &["resume", "team", "-n", &ns])?;
        ensure!(code == 0 && out.contains("resumed"), "{out}");
        c.wait_suspended("waiting", false, T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    clean_up(&mut c, viewer_role).await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn names_that_are_not_there_get_one_line() -> Result<()> {
    let c = Cluster::start().await?;
    let admin = kubeconfig_path();
    let (code, _, err) = plugin(&admin, &["why", "nothing-here", "-n", &c.namespace])?;
    ensure_eq!(code, 1);
    ensure!(
        err.trim()
            == format!(
                "error: no Workload \"nothing-here\" in namespace {}, and no job of that name has one",
                c.namespace
            ),
        "{err}"
    );
    let (code, _, err) = plugin(&admin, &["stop", "missing", "-n", &c.namespace])?;
    ensure_eq!(code, 1);
    ensure!(
        err.trim() == format!("error: no LocalQueue \"missing\" in namespace {}", c.namespace),
        "{err}"
    );
    let mut c = c;
    c.cleanup().await?;
    Ok(())
}

/// Writes the ClusterQueues and LocalQueues the admin reads, for the
/// `usage` golden tests, to `SLUICE_RECORD_DIR/usage`, if set.
async fn record_usage(c: &Cluster) -> Result<()> {
    let Some(dir) = std::env::var_os("SLUICE_RECORD_DIR") else {
        return Ok(());
    };
    let dir = PathBuf::from(dir).join("usage");
    std::fs::create_dir_all(&dir)?;
    let lp = ListParams::default();
    let mut cqs = Api::<ClusterQueue>::all(c.client.clone()).list(&lp).await?.items;
    cqs.retain(|q| q.metadata.name.as_deref().is_some_and(|n| n.ends_with(&c.suffix)));
    let lqs = Api::<LocalQueue>::namespaced(c.client.clone(), &c.namespace)
        .list(&lp)
        .await?;
    std::fs::write(dir.join("clusterqueues.json"), serde_json::to_string_pretty(&cqs)?)?;
    std::fs::write(dir.join("localqueues.json"), serde_json::to_string_pretty(&lqs.items)?)?;
    std::fs::write(dir.join("now.txt"), k8s_openapi::jiff::Timestamp::now().to_string())?;
    Ok(())
}

/// Parses RFC 4180 CSV: records of fields (quoted fields may hold commas,
/// doubled quotes and line breaks).
fn parse_csv(text: &str) -> Result<Vec<Vec<String>>> {
    let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    ensure!(
        !quoted && field.is_empty() && record.is_empty(),
        "CSV does not end with a record"
    );
    Ok(records)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn admins_and_viewers_see_gpu_hours_and_budgets_as_tables_json_and_csv() -> Result<()> {
    let mut c = Cluster::start().await?;
    let mut viewer_role = None;
    let result = async {
        let f = c.flavor("a100").await?;
        let cq = c
            .cluster_queue(
                "gpu",
                json!({
                    "budget": {"hours": "1", "period": "7d", "actions": [{"atPercent": 100, "action": "Stop"}]},
                    "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                        {"name": f, "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]
                }),
            )
            .await?;
        c.local_queue("team", &cq).await?;
        c.start_controller(&["--usage-flush-interval", "1s"]).await?;
        c.job("train", "team", 2, 2, &[], true).await?;
        c.wait_suspended("train", false, T).await?;
        // Some usage flushed into the LocalQueue's status.
        let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), &c.namespace);
        wait_for("usage in the LocalQueue's status", T, || async {
            let lq = lqs.get("team").await?;
            let st = lq.status.as_ref();
            let flushed = st
                .and_then(|s| s.usage.as_ref())
                .is_some_and(|u| !u.resources.is_empty());
            let budget = st
                .and_then(|s| s.cluster_queue.as_ref())
                .and_then(|s| s.budget.as_ref())
                .is_some();
            Ok((flushed && budget).then_some(()))
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        record_usage(&c).await?;
        let ns = c.namespace.clone();

        // The admin: the ClusterQueue and the LocalQueue, with the budget.
        let admin = kubeconfig_path();
        let v = plugin_json(&admin, &["usage", "-n", &ns, "-o", "json", "--since", "1h"])?;
        let rows = v["rows"].as_array().context("rows")?;
        let cq_row = rows
            .iter()
            .find(|r| r["kind"] == "ClusterQueue" && r["name"] == cq.as_str())
            .context("the ClusterQueue's row")?;
        ensure_eq!(cq_row["resource"], "nvidia.com/gpu");
        let used = cq_row["usedHours"].as_f64().context("usedHours")?;
        ensure!(used > 0.0 && used < 0.1, "4 GPUs for some seconds: {used}");
        ensure_eq!(cq_row["budget"]["limitHours"], 1.0);
        ensure!(rows.iter().any(|r| r["kind"] == "LocalQueue" && r["name"] == "team"));
        let (code, table, err) = plugin(&admin, &["usage", "-n", &ns])?;
        ensure!(code == 0, "{err}");
        ensure!(
            table.contains(&format!("clusterqueue/{cq}")) && table.contains("USED"),
            "{table}"
        );
        let (code, csv, err) = plugin(&admin, &["usage", "-n", &ns, "-o", "csv"])?;
        ensure!(code == 0, "{err}");
        let records = parse_csv(&csv)?;
        ensure!(records.len() >= 3, "a header and two rows: {csv}");
        ensure!(records.iter().all(|r| r.len() == records[0].len()), "{csv}");
        ensure_eq!(records[0][6], "used_hours");

        // A namespaced viewer: its LocalQueue only, with its budget.
        viewer_role = Some(grant_view(&mut c, "viewer").await?);
        let viewer = service_account_kubeconfig(&c, "viewer").await?;
        let v = wait_for("the viewer may read LocalQueues", T, || {
            let viewer = viewer.clone();
            async move { Ok(plugin_json(&viewer, &["usage", "-o", "json"]).ok()) }
        })
        .await?;
        let rows = v["rows"].as_array().context("rows")?;
        ensure!(rows.iter().all(|r| r["kind"] == "LocalQueue"), "{v}");
        let row = rows.iter().find(|r| r["name"] == "team").context("its LocalQueue")?;
        ensure_eq!(row["budget"]["limitHours"], 1.0);
        ensure!(row["totalHours"].as_f64().is_some_and(|h| h > 0.0), "{row}");
        let (code, csv, err) = plugin(&viewer, &["usage", "-o", "csv"])?;
        ensure!(code == 0, "{err}");
        ensure_eq!(parse_csv(&csv)?.len(), 2, "{csv}");
        let (code, _, err) = plugin(&viewer, &["queues", "-o", "csv"])?;
        ensure!(
            code != 0 && err.contains("only `kubectl sluice usage` prints CSV"),
            "{err}"
        );
        Ok::<_, anyhow::Error>(())
    }
    .await;
    clean_up(&mut c, viewer_role).await?;
    result
}
