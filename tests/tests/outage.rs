//! Outages of the control plane while `sluice controller` admits 60
//! random GPU gangs: the API server SIGKILLed for 10 s, then etcd
//! SIGKILLed and started again under the API server with its data kept,
//! for 5 s (inside the Lease) and for 30 s (twice the Lease). The
//! controller keeps running, admits again once the server is back (time
//! reported and bounded), the quota holds at every Workload event, every
//! gang is admitted once and finishes; and its log says each outage in a
//! few lines (counted and bounded), not once per failed call.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test outage -- --ignored --test-threads=1 --nocapture
//! ```
//!
//! Its own test binary: it stops servers of the control plane this
//! process started, so no other suite may share it. Like `controller.rs`:
//! no webhook, no kubelet (the load writes pod statuses).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use sluice_e2e::audit::QuotaAudit;
use sluice_e2e::cluster::{Cluster, Replica, wait_for};
use sluice_e2e::controller::{log_message, log_time};
use sluice_e2e::envtest::{self, Component, ControlPlane};
use sluice_e2e::load::{self, Load, Style};

const GANGS: usize = 60;
const QUOTA: i64 = 16;
const SEED: u64 = 2;
/// The chart's default `--lease-duration-seconds`.
const D: u64 = 15;
/// The most an outage may write to the log, from the server's death to
/// 20 s after its return: the outage's start and end, the lead lost and
/// taken back, the index rebuilt, and room for a few more.
const MAX_LINES: usize = 12;
/// How soon after the server is back the controller must admit again:
/// the API server reconnects, a Lease read (every D/5 = 3 s), the lists
/// of a new leader, a cycle.
const RESUME: Duration = Duration::from_secs(20);

/// The outages, one after the other.
const OUTAGES: [(Component, Duration); 3] = [
    (Component::ApiServer, Duration::from_secs(10)),
    (Component::Etcd, Duration::from_secs(5)),
    (Component::Etcd, Duration::from_secs(30)),
];

#[tokio::test]
#[ignore = "needs KUBEBUILDER_ASSETS (this test restarts the etcd and API server the harness started)"]
async fn etcd_and_the_api_server_restarted_under_load_lose_no_work_and_break_no_quota() -> Result<()> {
    if let Some(why) = envtest::own_plane_skipped_here() {
        eprintln!("{why}");
        return Ok(());
    }
    let plane = envtest::shared().context("KUBEBUILDER_ASSETS is not set")??;
    let mut c = Cluster::start().await?;
    let result = outages(&mut c, plane).await;
    c.cleanup().await?;
    result
}

async fn outages(c: &mut Cluster, plane: &'static ControlPlane) -> Result<()> {
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, QUOTA as u32, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    let dir = std::env::temp_dir().join(format!("sluice-e2e-outage-{}", c.suffix));
    std::fs::create_dir_all(&dir)?;
    let i = c.spawn_controller(Replica {
        lease_duration_seconds: D,
        log: Some(dir.join("controller.log")),
        ..Replica::default()
    })?;
    c.wait_ready(i).await?;
    let audit = QuotaAudit::start(c.client.clone(), &c.namespace, [(cq.clone(), QUOTA)].into());
    let gangs = load::gangs(SEED, GANGS, Duration::from_millis(3000));
    let load = Load::start(c.client.clone(), &c.namespace, "team", gangs, Style::Bare);
    let mut failures = Vec::new();
    for (which, down) in OUTAGES {
        // Work admitted, running and queued when the server dies.
        tokio::time::sleep(Duration::from_secs(10)).await;
        failures.extend(outage(c, i, plane, &audit, which, down).await?);
    }
    wait_for("every gang finished", Duration::from_secs(300), || async {
        Ok((load::finished(&c.client, &c.namespace).await? == GANGS).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = audit.seen();
    eprintln!(
        "{GANGS} gangs finished; {} Workload events audited, most GPUs held at once {:?} of {QUOTA}; load: {:?}",
        seen.events,
        seen.most.get(&cq),
        load.seen()
    );
    ensure!(failures.is_empty(), "{failures:#?}");
    ensure!(seen.over.is_empty(), "quota exceeded: {:?}", seen.over);
    ensure!(
        seen.admitted_twice().is_empty(),
        "admitted twice: {:?}",
        seen.admitted_twice()
    );
    ensure!(
        seen.admissions.len() == GANGS,
        "{} of {GANGS} Workloads seen admitted",
        seen.admissions.len()
    );
    Ok(())
}

/// `which` SIGKILLed for `down`, then started again, while controller `i`
/// runs: when it admitted again, and how much it logged meanwhile; what
/// went wrong.
async fn outage(
    c: &mut Cluster,
    i: usize,
    plane: &'static ControlPlane,
    audit: &QuotaAudit,
    which: Component,
    down: Duration,
) -> Result<Vec<String>> {
    let died = Timestamp::now();
    tokio::task::spawn_blocking(move || plane.kill(which)).await??;
    tokio::time::sleep(down).await;
    let back = Instant::now();
    let back_at = Timestamp::now();
    tokio::task::spawn_blocking(move || plane.restart(which)).await??;
    let resumed = wait_for("an admission after the server is back", 3 * RESUME, || async {
        Ok(audit.seen().last_admission.filter(|t| *t > back))
    })
    .await
    .ok()
    .map(|t| t - back);
    // The log from the server's death to 20 s after its return.
    tokio::time::sleep((back + Duration::from_secs(20)).saturating_duration_since(Instant::now())).await;
    let until = back_at + k8s_openapi::jiff::SignedDuration::from_secs(20);
    let lines: Vec<serde_json::Value> = c.controllers[i]
        .log_lines()?
        .into_iter()
        .filter(|l| log_time(l).is_some_and(|t| t >= died && t <= until))
        .collect();
    let mut by_message: BTreeMap<String, usize> = BTreeMap::new();
    for l in &lines {
        *by_message.entry(log_message(l).to_string()).or_default() += 1;
    }
    let what = format!("{which:?} down {down:?}");
    eprintln!(
        "{what}: first admission {} after it was back (bound {} ms); {} log lines from its death to 20 s after its return: {by_message:#?}",
        resumed.map_or(format!("none within {} ms", (3 * RESUME).as_millis()), |r| format!(
            "{} ms",
            r.as_millis()
        )),
        RESUME.as_millis(),
        lines.len()
    );
    let mut failures = Vec::new();
    if !c.controllers[i].running() {
        failures.push(format!("{what}: the controller exited"));
    }
    if resumed.is_none_or(|r| r > RESUME) {
        failures.push(format!("{what}: admitted again only {resumed:?} after it was back"));
    }
    if lines.len() > MAX_LINES {
        failures.push(format!("{what}: {} log lines", lines.len()));
    }
    Ok(failures)
}
