//! High availability on a real API server: two `sluice controller`
//! replicas with leader election (`--lease-duration-seconds 10`, one
//! Lease, distinct identities).
//!
//! - Started at the same instant, 50 times (a missing Lease, and a free
//!   one), exactly one of the two ever says it leads, and it is the one
//!   the Lease names.
//! - Under 60 random GPU gangs, the leader is SIGKILLed three times and
//!   frozen once (SIGSTOP past its Lease, then SIGCONT): each time another
//!   replica holds the Lease within the bound (lease duration + a renewal
//!   period + 1 s for the calls and the watch), the woken replica steps
//!   down and never writes the Lease again, no Lease naming a dead replica
//!   is renewed, and the quota holds at every Workload event; every gang
//!   is admitted once and finishes.
//!
//! ```text
//! cargo build -p sluice-cli
//! KUBEBUILDER_ASSETS=/path/to/bin cargo test -p sluice-e2e --test ha -- --ignored --test-threads=1 --nocapture
//! ```
//!
//! Like `controller.rs`: no webhook (Jobs are created suspended), no
//! kubelet (the load writes pod statuses).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use serde_json::json;
use sluice_e2e::audit::QuotaAudit;
use sluice_e2e::cluster::{Cluster, Controller, Replica, wait_for};
use sluice_e2e::controller::{log_message, log_time};
use sluice_e2e::lease_log::LeaseLog;
use sluice_e2e::load::{self, Load, Style};

/// `--lease-duration-seconds`.
const D: u64 = 10;
/// How often the holder renews and the others read: a fifth of `D`.
const R: Duration = Duration::from_secs(D / 5);
const T: Duration = Duration::from_secs(60);

/// The longest a takeover may take: `D` + `R`, and 1 s for the calls and
/// for the watch that sees it.
fn bound() -> Duration {
    Duration::from_secs(D) + R + Duration::from_secs(1)
}

fn logs_dir(c: &Cluster) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("sluice-e2e-ha-{}", c.suffix));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The times the run loop logged a change of leadership to `leading`.
fn leadership(ctl: &Controller, leading: bool) -> Result<Vec<Timestamp>> {
    Ok(ctl
        .log_lines()?
        .iter()
        .filter(|l| log_message(l) == "leadership changed" && l["fields"]["leading"] == leading)
        .filter_map(log_time)
        .collect())
}

/// How many log lines carry `message`.
fn logged(ctl: &Controller, message: &str) -> Result<usize> {
    Ok(ctl.log_lines()?.iter().filter(|l| log_message(l) == message).count())
}

/// API calls the replica completed (writes made and failed), from its metrics.
fn calls(ctl: &Controller) -> Result<f64> {
    let (code, body) = ctl.get("/metrics")?;
    ensure!(code == 200, "/metrics answered {code}");
    Ok(calls_in(&body))
}

/// The writes made and failed in a metrics exposition.
fn calls_in(body: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with("sluice_api_writes_total{") || l.starts_with("sluice_api_write_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

const ROUNDS: usize = 50;

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn two_replicas_started_at_the_same_instant_elect_exactly_one_leader_every_time() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = races(&mut c).await;
    c.cleanup().await?;
    result
}

/// [`ROUNDS`] rounds, each on a Lease of its own: missing in even rounds,
/// free (no holder) in odd ones. A replica that ever said it leads counts
/// as a leader of its round.
async fn races(c: &mut Cluster) -> Result<()> {
    let dir = logs_dir(c)?;
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), &c.namespace);
    let (mut wrong, mut raced) = (Vec::new(), 0);
    let started = Instant::now();
    for round in 0..ROUNDS {
        let name = format!("race-{round}");
        if round % 2 == 1 {
            let free: Lease = serde_json::from_value(json!({
                "metadata": {"name": name}, "spec": {"leaseDurationSeconds": D, "leaseTransitions": 3}
            }))?;
            leases.create(&PostParams::default(), &free).await?;
        }
        let pair = ["a", "b"]
            .into_iter()
            .map(|x| {
                c.spawn_controller(Replica {
                    lease_name: &name,
                    lease_duration_seconds: D,
                    identity: Some(format!("{name}-{x}")),
                    log: Some(dir.join(format!("{name}-{x}.log"))),
                    ..Replica::default()
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        // Once the Lease names one of them, a follower reads it every R:
        // each has read it again since.
        wait_for("the Lease to name a holder", T, || async {
            Ok(leases.get_opt(&name).await?.and_then(|l| l.spec?.holder_identity))
        })
        .await?;
        tokio::time::sleep(2 * R + Duration::from_secs(1)).await;
        let (mut leaders, mut refused) = (Vec::new(), false);
        for &i in &pair {
            if !leadership(&c.controllers[i], true)?.is_empty() {
                leaders.push(c.controllers[i].identity.clone());
            }
            refused |= logged(&c.controllers[i], "another replica wrote the Lease first")? > 0;
        }
        raced += usize::from(refused);
        let holder = leases.get(&name).await?.spec.and_then(|s| s.holder_identity);
        if leaders.len() != 1 || holder.as_ref() != leaders.first() {
            wrong.push(format!(
                "round {round}: leading {leaders:?}, the Lease names {holder:?}"
            ));
        }
        for &i in &pair {
            c.controllers[i].kill();
        }
    }
    eprintln!(
        "{ROUNDS} simultaneous starts in {:?}: {} with exactly one leader, the Lease's holder; in {raced} the loser's claim was refused with 409 (the two claims raced)",
        started.elapsed(),
        ROUNDS - wrong.len()
    );
    ensure!(wrong.is_empty(), "not exactly one leader: {wrong:#?}");
    Ok(())
}

const GANGS: usize = 60;
const QUOTA: i64 = 16;
const SEED: u64 = 52;

#[derive(Clone, Copy, Debug)]
enum Fault {
    Kill,
    Freeze,
}

#[tokio::test]
#[ignore = "needs a real API server: SLUICE_E2E_KUBECONFIG or KUBEBUILDER_ASSETS"]
async fn the_leader_killed_three_times_and_frozen_once_under_load_hands_over_within_the_bound() -> Result<()> {
    let mut c = Cluster::start().await?;
    let result = under_faults(&mut c).await;
    c.cleanup().await?;
    result
}

/// What the faults showed.
#[derive(Default)]
struct Faults {
    lines: Vec<String>,
    /// Replicas killed, and when.
    dead: Vec<(String, Timestamp)>,
    next: usize,
}

async fn under_faults(c: &mut Cluster) -> Result<()> {
    let dir = logs_dir(c)?;
    let f = c.flavor("a100").await?;
    let cq = c.gpu_queue("cq", &f, QUOTA as u32, None, json!({})).await?;
    c.local_queue("team", &cq).await?;
    let leases = LeaseLog::start(c.client.clone(), &c.namespace, "sluice-controller");
    let audit = QuotaAudit::start(c.client.clone(), &c.namespace, [(cq.clone(), QUOTA)].into());
    let mut faults = Faults::default();
    for _ in 0..2 {
        let i = replica(c, &dir, &mut faults)?;
        c.wait_ready(i).await?;
    }
    let gangs = load::gangs(SEED, GANGS, Duration::from_millis(2500));
    let load = Load::start(c.client.clone(), &c.namespace, "team", gangs, Style::Bare);
    let began = Instant::now();
    for fault in [Fault::Kill, Fault::Kill, Fault::Freeze, Fault::Kill] {
        // Work queued and running when the fault comes.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let holder = wait_for("a Lease holder", T, || async { Ok(leases.holder()) }).await?;
        let i = c
            .controllers
            .iter()
            .position(|x| x.identity == holder)
            .with_context(|| format!("{holder} is not one of this test's replicas"))?;
        match fault {
            Fault::Kill => kill(c, i, &leases, &dir, &mut faults).await?,
            Fault::Freeze => freeze(c, i, &leases, &mut faults).await?,
        }
    }
    wait_for("every gang finished", Duration::from_secs(300), || async {
        Ok((load::finished(&c.client, &c.namespace).await? == GANGS).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = audit.seen();
    for line in &faults.lines {
        eprintln!("{line}");
    }
    eprintln!(
        "{GANGS} gangs finished {:?} after the first arrived; {} Workload events audited, most GPUs held at once {:?} of {QUOTA}; {} Lease states seen; load: {:?}",
        began.elapsed(),
        seen.events,
        seen.most.get(&cq),
        leases.states().len(),
        load.seen()
    );
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
    for (holder, died) in &faults.dead {
        let stray = leases.renewed_after_death(holder, *died);
        ensure!(stray.is_empty(), "{holder}'s Lease renewed after it died: {stray:?}");
    }
    Ok(())
}

/// Another replica (with a JSON log), numbered by `faults.next`.
fn replica(c: &mut Cluster, dir: &std::path::Path, faults: &mut Faults) -> Result<usize> {
    let n = faults.next;
    faults.next += 1;
    c.spawn_controller(Replica {
        lease_duration_seconds: D,
        log: Some(dir.join(format!("replica-{n}.log"))),
        ..Replica::default()
    })
}

/// SIGKILL of leader `i`: another replica takes the Lease within the
/// bound; a new replica is started so that two run again.
async fn kill(c: &mut Cluster, i: usize, leases: &LeaseLog, dir: &std::path::Path, faults: &mut Faults) -> Result<()> {
    let holder = c.controllers[i].identity.clone();
    let died = Timestamp::now();
    let t0 = Instant::now();
    c.controllers[i].kill();
    let (at, by) = wait_for("another replica holds the Lease", 3 * bound(), || async {
        Ok(leases.taken_from(&holder, t0))
    })
    .await?;
    let took = at - t0;
    faults.lines.push(format!(
        "SIGKILL {holder}: {by} held the Lease {} ms later (bound {} ms)",
        ms(took),
        ms(bound())
    ));
    faults.dead.push((holder, died));
    ensure!(took <= bound(), "takeover took {took:?}, over {:?}", bound());
    replica(c, dir, faults)?;
    Ok(())
}

/// SIGSTOP of leader `i` until its Lease has run out and another replica
/// holds it, then SIGCONT: it steps down and never writes the Lease again.
async fn freeze(c: &mut Cluster, i: usize, leases: &LeaseLog, faults: &mut Faults) -> Result<()> {
    let holder = c.controllers[i].identity.clone();
    let before = calls(&c.controllers[i])?;
    let t0 = Instant::now();
    c.controllers[i].freeze()?;
    let (at, by) = wait_for("another replica holds the Lease", 3 * bound(), || async {
        Ok(leases.taken_from(&holder, t0))
    })
    .await?;
    let took = at - t0;
    // Frozen well past its Lease.
    tokio::time::sleep((t0 + Duration::from_secs(D + 5)).saturating_duration_since(Instant::now())).await;
    let woke = Timestamp::now();
    let thawed = Instant::now();
    c.controllers[i].thaw()?;
    let stepped = wait_for("the woken replica steps down", T, || async {
        Ok(leadership(&c.controllers[i], false)?.into_iter().find(|t| *t >= woke))
    })
    .await?;
    let step_down = stepped.duration_since(woke).as_millis();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = calls(&c.controllers[i])?;
    let stray: Vec<_> = leases
        .states()
        .into_iter()
        .filter(|s| s.seen > at && s.holder.as_deref() == Some(holder.as_str()))
        .collect();
    faults.lines.push(format!(
        "SIGSTOP {holder}: {by} held the Lease {} ms later (bound {} ms); SIGCONT after {} ms; it stepped down {} ms after waking; API calls it completed from the freeze to 3 s after it stepped down: {} (its metrics)",
        ms(took),
        ms(bound()),
        ms(thawed - t0),
        step_down,
        after - before
    ));
    ensure!(took <= bound(), "takeover took {took:?}, over {:?}", bound());
    ensure!(
        stray.is_empty(),
        "the Lease named {holder} again after {by} took it: {stray:?}"
    );
    ensure!(c.controllers[i].running(), "the woken replica exited");
    Ok(())
}

#[test]
fn the_bound_is_the_lease_duration_a_renewal_period_and_a_second() {
    assert_eq!(bound(), Duration::from_secs(13));
    let body = "# TYPE sluice_api_writes_total counter\nsluice_api_writes_total{kind=\"job\"} 3\nsluice_api_write_errors_total{kind=\"event\"} 1\nsluice_admitted_workloads_total 9\n";
    assert_eq!(calls_in(body), 4.0);
}
