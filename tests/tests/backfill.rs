//! End-to-end test of backfill (ClusterQueue `spec.backfill.policy:
//! Reserve`) against a real API server: a big gang that does not fit
//! reserves the quota from when declared work ends; a job whose declared
//! run time ends before that is admitted at once and says why; one that
//! would run past it waits and says why; the big gang's status counts
//! what went ahead of it. A job that went ahead by its run time and runs
//! past it is evicted, also by a controller restarted in between. With
//! node placement, a gang whose quota fits but whose pod fits no node
//! reserves the node that frees first, and says which. On a loaded
//! machine, again and again: a Job created just after a gang was told its
//! start never overtakes it, and a short one is backfilled with its
//! message every time.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test backfill -- --ignored --test-threads=1
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::batch::v1::Job;
use kube::api::PostParams;
use serde_json::json;
use sluice_api::labels::{EXPECTED_RUNTIME, QUEUE};
use sluice_api::v1alpha1::Workload;
use sluice_e2e::cluster::{Cluster, wait_for};
use sluice_e2e::ensure_eq;

const T: Duration = Duration::from_secs(60);
const GPU: &str = "nvidia.com/gpu";

/// A suspended Job of `pods` pods with `gpus` GPUs each in LocalQueue
/// `team`, declaring `runtime` (`sluice.dev/expected-runtime`) if given.
async fn job(c: &Cluster, name: &str, pods: i32, gpus: u32, runtime: Option<&str>) -> Result<Job> {
    job_in(c, "team", name, pods, gpus, runtime).await
}

/// [`job`] in LocalQueue `queue`.
async fn job_in(c: &Cluster, queue: &str, name: &str, pods: i32, gpus: u32, runtime: Option<&str>) -> Result<Job> {
    let annotations: BTreeMap<String, String> = runtime
        .map(|r| (EXPECTED_RUNTIME.to_string(), r.to_string()))
        .into_iter()
        .collect();
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE: queue}, "annotations": annotations},
        "spec": {"parallelism": pods, "completions": pods, "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"limits": {GPU: gpus.to_string()}}}]}}}
    }))?;
    Ok(c.jobs().create(&PostParams::default(), &job).await?)
}

/// A flavor and a ClusterQueue of `gpus` GPUs of it with
/// `backfill.policy: Reserve`, served to this test's namespace by the
/// LocalQueue `team`: their names.
async fn reserving_queue(c: &mut Cluster, gpus: u32) -> Result<(String, String)> {
    let f = c.flavor("a100").await?;
    let cq = c
        .cluster_queue(
            "cq",
            json!({
                "backfill": {"policy": "Reserve"},
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": f, "resources": [{"name": GPU, "nominalQuota": gpus.to_string()}]}]}]
            }),
        )
        .await?;
    c.local_queue("team", &cq).await?;
    Ok((f, cq))
}

/// The `QuotaReserved` condition's reason and message.
fn quota_reserved(wl: &Workload) -> Result<(String, String)> {
    let c = wl
        .status
        .as_ref()
        .and_then(|s| s.condition("QuotaReserved"))
        .context("no QuotaReserved")?;
    Ok((c.reason.clone(), c.message.clone()))
}

/// Waits until `job`'s Workload says `QuotaReserved=False` for `reason`.
async fn wait_pending_for(c: &Cluster, job: &str, reason: &str) -> Result<String> {
    wait_for(&format!("{job} pending for {reason}"), T, || async {
        let wl = c.workload_of(job).await?;
        Ok(quota_reserved(&wl).ok().filter(|(r, _)| r == reason).map(|(_, m)| m))
    })
    .await
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_big_gang_reserves_a_short_job_backfills_and_a_long_one_waits() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        reserving_queue(&mut c, 8).await?;
        c.start_controller(&[]).await?;

        // 1. `run` holds 6 of the 8 GPUs for a declared 2 hours.
        job(&c, "run", 3, 2, Some("2h")).await?;
        c.wait_suspended("run", false, T).await?;
        let run = c.workload_of("run").await?;
        let declared = run.metadata.annotations.as_ref().and_then(|a| a.get(EXPECTED_RUNTIME));
        ensure_eq!(declared.map(String::as_str), Some("7200s"));

        // 2. `big` (8 GPUs) does not fit: it reserves from ~2 h ahead.
        job(&c, "big", 4, 2, None).await?;
        let message = wait_pending_for(&c, "big", "Reserved").await?;
        ensure!(
            message.contains("its quota is reserved from ~") && message.contains("0 smaller workload(s)"),
            "{message}"
        );

        // 3. `long` fits the 2 free GPUs but would run past the start.
        job(&c, "long", 1, 2, Some("3h")).await?;
        let message = wait_pending_for(&c, "long", "WouldDelayReservation").await?;
        ensure!(
            message.contains("would delay") && message.contains("job-big") && message.contains("3h00m"),
            "{message}"
        );

        // 4. `short` ends before it: admitted at once, and says why.
        job(&c, "short", 1, 2, Some("30m")).await?;
        c.wait_suspended("short", false, T).await?;
        let (_, message) = quota_reserved(&c.workload_of("short").await?)?;
        ensure!(
            message.contains("backfilled: its declared run time ends before the reservation of")
                && message.contains("job-big"),
            "{message}"
        );

        // 5. The big gang counts it; `long` still waits; nothing is over quota.
        let message = wait_pending_for(&c, "big", "Reserved").await?;
        wait_for("big told 1 went ahead", T, || async {
            let (_, m) = quota_reserved(&c.workload_of("big").await?)?;
            Ok(m.contains("1 smaller workload(s)").then_some(()))
        })
        .await
        .with_context(|| message.clone())?;
        ensure!(c.job_suspended("long").await?, "long was admitted");
        ensure!(c.job_suspended("big").await?, "big was admitted over quota");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_job_that_went_ahead_by_its_run_time_is_evicted_for_overrunning_after_a_restart() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let (_, cq) = reserving_queue(&mut c, 8).await?;
        c.start_controller(&[]).await?;

        // `run` holds 6 GPUs for a declared 2 h; `big` (8) reserves from
        // then; `short` declares 20 s and goes ahead of it.
        job(&c, "run", 3, 2, Some("2h")).await?;
        c.wait_suspended("run", false, T).await?;
        job(&c, "big", 4, 2, None).await?;
        wait_pending_for(&c, "big", "Reserved").await?;
        job(&c, "short", 1, 2, Some("20s")).await?;
        c.wait_suspended("short", false, T).await?;
        let admission = c.workload_of("short").await?.status.and_then(|s| s.admission);
        let record = admission
            .and_then(|a| a.backfill)
            .context("no status.admission.backfill")?;
        ensure_eq!(record.cluster_queue, cq);
        ensure!(record.reserved_for.ends_with("/job-big"), "{record:?}");

        // A new controller process rebuilds its ledger from the Workloads.
        c.controllers[0].kill();
        c.start_controller(&[]).await?;

        // `run` ends; `short`, past its 20 s, alone keeps `big` out: evicted.
        c.mark_pods("run", 3, "Succeeded").await?;
        let wl = c.wait_condition("short", "Evicted", "True", T).await?;
        let evicted = wl
            .status
            .as_ref()
            .and_then(|s| s.condition("Evicted"))
            .context("no Evicted")?;
        ensure_eq!(evicted.reason, "BackfillOverrun", "{}", evicted.message);
        c.wait_suspended("short", true, T).await?;
        c.reap_terminating_pods("short").await?;
        c.wait_suspended("big", false, T).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn with_node_placement_a_gang_that_fits_quota_but_no_node_reserves_the_node_that_frees_first() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = async {
        let (f, _) = reserving_queue(&mut c, 24).await?;
        let allocatable = json!({GPU: "8", "cpu": "16", "memory": "64Gi", "pods": "110"});
        for base in ["gpu-a", "gpu-b"] {
            c.node(base, json!({"sluice.dev/e2e-gpu": f}), allocatable.clone())
                .await?;
        }
        c.start_controller(&["--placement=nodes"]).await?;

        // 6 GPUs on one node for 3 h, 4 on the other for 2 h.
        job(&c, "long", 1, 6, Some("3h")).await?;
        c.wait_suspended("long", false, T).await?;
        job(&c, "mid", 1, 4, Some("2h")).await?;
        c.wait_suspended("mid", false, T).await?;

        // One 8-GPU pod: 14 of 24 GPUs of quota free, no node with 8.
        job(&c, "big", 1, 8, None).await?;
        let message = wait_pending_for(&c, "big", "Reserved").await?;
        ensure!(
            message.contains("its quota is reserved from ~")
                && message.contains(&format!("with room on 1 node of {f}")),
            "{message}"
        );
        ensure!(c.job_suspended("big").await?, "big was started");
        Ok::<_, anyhow::Error>(())
    }
    .await;
    c.cleanup().await?;
    result
}

/// Busy-looping threads that load the machine until dropped.
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl CpuHog {
    fn start(threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut spins = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spins = spins.wrapping_add(1);
                        std::hint::spin_loop();
                    }
                    spins
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What one round of the issue's steps showed.
#[derive(Debug, Default)]
struct Round {
    /// `long`, which would delay the reservation, was admitted.
    overtaken: bool,
    /// `short` was admitted with its `backfilled: …` message and record.
    backfilled: bool,
    /// `long`'s Workload was created in the gang's second with a UID
    /// sorting before the gang's: queue order by creation time and UID
    /// put it ahead of the gang.
    tied_ahead: bool,
}

/// One round on its own flavor, 8-GPU node and reserving queue: `run` (4
/// GPUs, 60 s) admitted; `gang` (2 × 4 GPUs) told its reservation; at
/// once `long` (4 GPUs, 1 h) and `short` (4 GPUs, 15 s) created.
async fn round(c: &mut Cluster, i: usize) -> Result<Round> {
    let f = c.flavor(&format!("a100-{i}")).await?;
    let allocatable = json!({GPU: "8", "cpu": "16", "memory": "64Gi", "pods": "110"});
    c.node(&format!("gpu-{i}"), json!({"sluice.dev/e2e-gpu": f}), allocatable)
        .await?;
    let cq = c
        .cluster_queue(
            &format!("cq-{i}"),
            json!({
                "backfill": {"policy": "Reserve"},
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                    {"name": f, "resources": [{"name": GPU, "nominalQuota": "8"}]}]}]
            }),
        )
        .await?;
    let lq = format!("team-{i}");
    c.local_queue(&lq, &cq).await?;
    let (run, gang, long, short) = (
        format!("run-{i}"),
        format!("gang-{i}"),
        format!("long-{i}"),
        format!("short-{i}"),
    );
    job_in(c, &lq, &run, 1, 4, Some("60s")).await?;
    c.wait_suspended(&run, false, T).await?;
    job_in(c, &lq, &gang, 2, 4, None).await?;
    // As soon as the gang is told its start (polled often: the Jobs that
    // follow land in its second as often as they can).
    let deadline = Instant::now() + T;
    loop {
        let told = match c.workloads().get_opt(&format!("job-{gang}")).await? {
            Some(wl) => quota_reserved(&wl).is_ok_and(|(r, m)| r == "Reserved" && m.contains("reserved from ~")),
            None => false,
        };
        if told {
            break;
        }
        ensure!(Instant::now() < deadline, "{gang} never told its reservation");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job_in(c, &lq, &long, 1, 4, Some("1h")).await?;
    job_in(c, &lq, &short, 1, 4, Some("15s")).await?;

    // Whichever is admitted first: `short`, as it should, or `long`,
    // which leaves `short` no room.
    wait_for(&format!("{short} or {long} admitted"), T, || async {
        let started = !c.job_suspended(&short).await? || !c.job_suspended(&long).await?;
        Ok(started.then_some(()))
    })
    .await?;
    let mut out = Round {
        overtaken: !c.job_suspended(&long).await?,
        ..Round::default()
    };
    if !c.job_suspended(&short).await? {
        let wl = c.workload_of(&short).await?;
        let (_, message) = quota_reserved(&wl)?;
        let record = (wl.status.as_ref())
            .and_then(|s| s.admission.as_ref())
            .and_then(|a| a.backfill.as_ref());
        out.backfilled = message.contains("backfilled: its declared run time ends before the reservation of")
            && message.contains(&format!("job-{gang}"))
            && record.is_some_and(|r| r.reserved_for.ends_with(&format!("/job-{gang}")));
        if !out.backfilled {
            eprintln!("round {i}: {short} admitted with {message:?}, record {record:?}");
        }
    }
    // `long` was judged no later than `short`: told why it waits (that it
    // would delay the gang, or once `short` took the rest, that it does
    // not fit), unless it was admitted.
    if !out.overtaken {
        let why = wait_for(&format!("{long} told why it waits"), T, || async {
            Ok(quota_reserved(&c.workload_of(&long).await?).ok())
        })
        .await?;
        out.overtaken = !c.job_suspended(&long).await?;
        if !matches!(why.0.as_str(), "WouldDelayReservation" | "InsufficientQuota") {
            eprintln!("round {i}: {long} waits for {why:?}");
        }
    }
    ensure!(c.job_suspended(&gang).await?, "{gang} admitted over quota");
    let (g, l) = (c.workload_of(&gang).await?, c.workload_of(&long).await?);
    let created = |w: &Workload| w.metadata.creation_timestamp.clone();
    out.tied_ahead = created(&g) == created(&l) && l.metadata.uid < g.metadata.uid;
    Ok(out)
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn a_reservation_is_never_overtaken_under_load() -> Result<()> {
    const ROUNDS: usize = 20;
    let mut c = Cluster::start().await?;
    let hog = CpuHog::start(3);
    let result = async {
        c.start_controller(&["--placement=nodes", "--explain-after=0s", "--positions-interval=5s"])
            .await?;
        let mut rounds = Vec::new();
        for i in 0..ROUNDS {
            rounds.push(round(&mut c, i).await?);
        }
        let overtaken = rounds.iter().filter(|r| r.overtaken).count();
        let backfilled = rounds.iter().filter(|r| r.backfilled).count();
        let tied = rounds.iter().filter(|r| r.tied_ahead).count();
        eprintln!(
            "{ROUNDS} rounds: {overtaken} overtaken, {backfilled} short ones backfilled with their message, \
             {tied} with the long Job created in the gang's second and sorting first by UID"
        );
        ensure_eq!(overtaken, 0);
        ensure_eq!(backfilled, ROUNDS);
        Ok::<_, anyhow::Error>(())
    }
    .await;
    drop(hog);
    c.cleanup().await?;
    result
}
