//! `sluice controller`: watch Jobs and Sluice objects, admit through the
//! engine, apply decisions through the API server. One config struct;
//! every flag is also an environment variable.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Args};
use sluice_api::duration::{millis, parse_duration};
use sluice_controller::idle::{IdleSettings, PromSettings};
use sluice_controller::index::IndexConfig;
use sluice_controller::run::{LeaseConfig, RunConfig};
use sluice_kinds::JobKind;
use sluice_scheduler::{FairShareStrategies, FairSharing};

use crate::logging::LogArgs;

/// Run the controller.
#[derive(Debug, Args)]
#[command(after_help = sluice_api::duration::FLAGS_HELP)]
pub struct ControllerArgs {
    /// Sustained API writes per second (client-side rate limit).
    #[arg(long, env = "SLUICE_KUBE_QPS", default_value_t = sluice_controller::limit::DEFAULT_KUBE_QPS)]
    kube_qps: f64,
    /// API writes allowed in a burst above --kube-qps.
    #[arg(long, env = "SLUICE_KUBE_BURST", default_value_t = sluice_controller::limit::DEFAULT_KUBE_BURST)]
    kube_burst: u32,
    /// Evict and requeue an admitted Job whose pods are not all ready within
    /// this time (e.g. 10m, 90s, 1h; 0 turns the check off).
    #[arg(long, env = "SLUICE_PODS_READY_TIMEOUT", value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pods_ready_timeout: Duration,
    /// First requeue backoff after a pods-ready timeout (doubles each time).
    #[arg(long, env = "SLUICE_REQUEUE_BACKOFF_BASE", value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    requeue_backoff_base: Duration,
    /// Longest requeue backoff.
    #[arg(long, env = "SLUICE_REQUEUE_BACKOFF_MAX", value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    requeue_backoff_max: Duration,
    /// Most evictions of one workload the controller decides itself
    /// (pods-ready timeouts and idle-GPU reclaim, counted together): at the
    /// next one it is deactivated (spec.active: false) instead of requeued.
    /// Unset: no limit.
    #[arg(long, env = "SLUICE_REQUEUE_LIMIT")]
    requeue_limit: Option<u32>,
    /// Elect a leader with a coordination.k8s.io Lease; only the holder writes.
    #[arg(long, env = "SLUICE_LEADER_ELECT", default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    lease_namespace: String,
    /// Name of the Lease.
    #[arg(long, env = "SLUICE_LEASE_NAME", default_value = "sluice-controller")]
    lease_name: String,
    /// Seconds a Lease stays valid without renewal. The holder renews every
    /// fifth of it; when the holder dies another replica takes over within
    /// this plus a fifth.
    #[arg(long, env = "SLUICE_LEASE_DURATION_SECONDS", default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Name of this replica (Lease holder, Event reportingInstance); defaults to the host name.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "SLUICE_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    log: LogArgs,
    /// Also queue Jobs labelled kueue.x-k8s.io/queue-name.
    #[arg(long, env = "SLUICE_KUEUE_COMPAT")]
    kueue_compat: bool,
    /// Switching over from Kueue: `count` (the default) counts the quota
    /// Kueue's admitted Workloads hold in Sluice's ClusterQueue of the same
    /// name until Kueue lets go of it (when Kueue's CRDs are served and
    /// --kueue-compat is off); `ignore` does not look at them.
    #[arg(long, env = "SLUICE_KUEUE_USAGE", value_enum, default_value_t = KueueUsage::Count)]
    kueue_usage: KueueUsage,
    /// Minimum time between two status writes of one ClusterQueue, LocalQueue or Cohort.
    #[arg(long, env = "SLUICE_QUEUE_STATUS_INTERVAL", value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    queue_status_interval: Duration,
    /// Writes per second for pending explanations and bookkeeping (queue
    /// status, finished states) beyond the budget admissions leave unused;
    /// never more than a tenth of --kube-qps (0: that tenth; not used
    /// without --kube-qps).
    #[arg(long, env = "SLUICE_EXPLAIN_QPS", default_value_t = sluice_controller::limit::DEFAULT_EXPLAIN_QPS)]
    explain_qps: f64,
    /// No pending explanation is written for a workload created less than
    /// this long ago (most waits in a busy queue end sooner; 0: at once).
    #[arg(long, env = "SLUICE_EXPLAIN_AFTER", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    explain_after: Duration,
    /// How often usage over time (GPU-hours per queue) is written into
    /// ClusterQueue and LocalQueue status: the most a restart can lose.
    #[arg(long, env = "SLUICE_USAGE_FLUSH_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    usage_flush_interval: Duration,
    /// Fair sharing over time: the half-life of the decayed average usage
    /// that counts, above nominal quota, as borrowing when shares are
    /// compared (e.g. 24h); 0: off, shares count current borrowing only.
    #[arg(long, env = "SLUICE_USAGE_HALF_LIFE", value_name = "DURATION", default_value = "0", value_parser = parse_duration)]
    usage_half_life: Duration,
    /// In each namespace that queues every object (and is not trusted with
    /// GPU system pods), keep a ResourceQuota `sluice-admitted-gpus`
    /// capping its pods' GPU requests at what Sluice admitted there, so the
    /// API server refuses GPU pods beyond the quota even without the webhook.
    #[arg(long, env = "SLUICE_GPU_QUOTA_BACKSTOP", default_value_t = true, action = clap::ArgAction::Set)]
    gpu_quota_backstop: bool,
    /// Delete a GPU pod seen running outside the queue in a namespace that
    /// queues every object (the webhook was down or bypassed when it was
    /// made) this long after it is first seen; 0: report it only (a
    /// Warning Event on the pod and sluice_unqueued_gpu_pods_total).
    #[arg(long, env = "SLUICE_UNQUEUED_GPU_POD_GRACE", default_value = "0", value_parser = parse_duration)]
    unqueued_gpu_pod_grace: Duration,
    /// Resource transformations, as YAML or JSON (Kueue's
    /// resources.transformations): each `{input, strategy: Retain|Replace,
    /// outputs: {resource: factor}}` makes a request of `input` count, for
    /// quota, fair sharing and budgets, as the outputs times their factors
    /// (a quantity such as 10Gi, or a fraction such as 1/7), e.g. a MIG
    /// slice as a seventh of a sluice.dev/gpu-equivalent. Nodes still see
    /// the real request.
    #[arg(long, env = "SLUICE_RESOURCE_TRANSFORMATIONS", default_value = "", value_parser = parse_transformations)]
    resource_transformations: Transformations,
    /// Kinds to queue besides batch/v1 Jobs, comma-separated
    /// (jobset.x-k8s.io/jobset, kubeflow.org/pytorchjob, kubeflow.org/mpijob,
    /// ray.io/rayjob, kubeflow.org/tfjob, kubeflow.org/xgboostjob,
    /// kubeflow.org/paddlejob, kubeflow.org/jaxjob, ray.io/raycluster,
    /// trainer.kubeflow.org/trainjob, deployment, statefulset,
    /// leaderworkerset.x-k8s.io/leaderworkerset), or "auto": every one
    /// whose resource the API server serves at start (a kind installed later
    /// needs a restart).
    #[arg(long, env = "SLUICE_INTEGRATIONS", default_value = "auto", value_parser = parse_integrations)]
    integrations: Integrations,
    /// Prometheus holding dcgm-exporter's GPU metrics, for ClusterQueues'
    /// idleReclaim (http:// or https://, e.g. http://prometheus.monitoring:9090).
    /// Unset: queues with idleReclaim report IdleCheckUnavailable.
    #[arg(long, env = "SLUICE_PROMETHEUS_URL")]
    prometheus_url: Option<String>,
    /// PEM file of the CA of Prometheus's HTTPS certificate (default: the
    /// cluster's CA from the service account).
    #[arg(long, env = "SLUICE_PROMETHEUS_CA_FILE")]
    prometheus_ca_file: Option<std::path::PathBuf>,
    /// File holding a bearer token for Prometheus (read before every query).
    #[arg(long, env = "SLUICE_PROMETHEUS_TOKEN_FILE")]
    prometheus_token_file: Option<std::path::PathBuf>,
    /// Time limit of one Prometheus query attempt (3 attempts per check).
    #[arg(long, env = "SLUICE_PROMETHEUS_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    prometheus_timeout: Duration,
    /// PromQL giving GPU utilisation (percent) as one series per pod,
    /// labelled namespace and pod; evaluated over each idle window.
    #[arg(long, env = "SLUICE_IDLE_QUERY", default_value = sluice_controller::idle::DEFAULT_QUERY)]
    idle_query: String,
    /// Time between idle-GPU checks, also the query's resolution (at least 1s).
    #[arg(long, env = "SLUICE_IDLE_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    idle_interval: Duration,
    /// How often queue positions and estimated start times are recomputed
    /// (a forecast on a copy of the engine) and published (at least 1s).
    #[arg(long, env = "SLUICE_POSITIONS_INTERVAL", value_name = "DURATION", default_value = "1m", value_parser = parse_duration)]
    positions_interval: Duration,
    /// What admission requires: `nodes` (the default) admits a workload
    /// only if its pods fit on the nodes of their flavors at once, and
    /// watches Nodes and bound Pods for it; `quota-only` looks at quota
    /// alone (for clusters where Sluice may not read Nodes and Pods).
    #[arg(long, env = "SLUICE_PLACEMENT", value_enum, default_value_t = Placement::Nodes)]
    placement: Placement,
    /// Fair sharing in cohorts: `on` (the default) lends unused quota to
    /// the queues with the lowest weighted share first (spec.fairSharing.weight
    /// of ClusterQueues and Cohorts), and a queue preempts in its cohort by
    /// the share rules of --fair-sharing-strategies (reason
    /// InCohortFairSharing); `off`: borrowing follows queue order, and
    /// preemption across queues reclaimWithinCohort/borrowWithinCohort alone.
    #[arg(long, env = "SLUICE_FAIR_SHARING", value_enum, default_value_t = Switch::On)]
    fair_sharing: Switch,
    /// The fair-sharing preemption rules, tried in this order
    /// (comma-separated): LessThanOrEqualToFinalShare (preempt while the
    /// preemptor's queue ends at most at the victim's queue's share without
    /// the victim), LessThanInitialShare (while it ends below the victim's
    /// queue's share now), or both in that order (the default).
    #[arg(
        long,
        env = "SLUICE_FAIR_SHARING_STRATEGIES",
        default_value = "LessThanOrEqualToFinalShare,LessThanInitialShare",
        value_parser = parse_strategies
    )]
    fair_sharing_strategies: FairShareStrategies,
}

const FINAL_SHARE: &str = "LessThanOrEqualToFinalShare";
const INITIAL_SHARE: &str = "LessThanInitialShare";

/// `--fair-sharing-strategies`: one of the two, or both in Kueue's order.
fn parse_strategies(s: &str) -> Result<FairShareStrategies, String> {
    let names: Vec<&str> = s.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    for n in &names {
        if ![FINAL_SHARE, INITIAL_SHARE].contains(n) {
            return Err(format!(
                "unknown strategy {n:?} (known: {FINAL_SHARE}, {INITIAL_SHARE})"
            ));
        }
    }
    match names.as_slice() {
        [FINAL_SHARE] => Ok(FairShareStrategies::LessThanOrEqualToFinalShare),
        [INITIAL_SHARE] => Ok(FairShareStrategies::LessThanInitialShare),
        [FINAL_SHARE, INITIAL_SHARE] => Ok(FairShareStrategies::Both),
        [] => Err(format!("name at least one strategy ({FINAL_SHARE}, {INITIAL_SHARE})")),
        _ => Err(format!(
            "{s:?}: give {FINAL_SHARE}, {INITIAL_SHARE}, or both in that order (each once)"
        )),
    }
}

/// `--fair-sharing` and `--fair-sharing-strategies`.
fn fair_sharing(mode: Switch, strategies: FairShareStrategies) -> FairSharing {
    match mode {
        Switch::Off => FairSharing::Off,
        Switch::On => FairSharing::On { strategies },
    }
}

/// `--placement`, as written on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Placement {
    Nodes,
    QuotaOnly,
}

impl From<Placement> for sluice_scheduler::PlacementMode {
    fn from(p: Placement) -> Self {
        match p {
            Placement::Nodes => sluice_scheduler::PlacementMode::Nodes,
            Placement::QuotaOnly => sluice_scheduler::PlacementMode::QuotaOnly,
        }
    }
}

/// `on` / `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

/// `--kueue-usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum KueueUsage {
    Count,
    Ignore,
}

/// `--resource-transformations`, ready for the engine.
#[derive(Clone, Debug)]
struct Transformations(Vec<sluice_scheduler::Transformation>);

fn parse_transformations(s: &str) -> Result<Transformations, String> {
    sluice_convert::transform::from_text(s).map(Transformations)
}

/// `--integrations`.
#[derive(Clone, Debug)]
enum Integrations {
    Auto,
    Listed(Vec<JobKind>),
}

fn parse_integrations(s: &str) -> Result<Integrations, String> {
    if s.trim() == "auto" {
        return Ok(Integrations::Auto);
    }
    let mut kinds = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match JobKind::from_flag(name) {
            Some(k) => kinds.push(k),
            None => {
                let known: Vec<&str> = JobKind::ALL.iter().map(|k| k.flag_name()).collect();
                return Err(format!("unknown kind {name:?} (known: {}, or auto)", known.join(", ")));
            }
        }
    }
    Ok(Integrations::Listed(kinds))
}

pub fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    let (log, cfg, discover) = settings(args);
    log.init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(start(cfg, discover))?;
    Ok(ExitCode::SUCCESS)
}

/// What the controller finds out from the API server before it starts.
struct Discover {
    integrations: Integrations,
    /// `--kueue-usage=count` without `--kueue-compat`: Kueue's own
    /// Workloads count against the quota.
    kueue_workloads: bool,
}

/// The flags as the controller's settings (every flag used), its logging,
/// and what to discover at start.
fn settings(args: ControllerArgs) -> (LogArgs, RunConfig, Discover) {
    let ControllerArgs {
        kube_qps,
        kube_burst,
        pods_ready_timeout,
        requeue_backoff_base,
        requeue_backoff_max,
        requeue_limit,
        leader_elect,
        lease_namespace,
        lease_name,
        lease_duration_seconds,
        identity,
        metrics_addr,
        log,
        kueue_compat,
        kueue_usage,
        queue_status_interval,
        explain_qps,
        explain_after,
        usage_flush_interval,
        usage_half_life,
        gpu_quota_backstop,
        unqueued_gpu_pod_grace,
        resource_transformations,
        integrations,
        prometheus_url,
        prometheus_ca_file,
        prometheus_token_file,
        prometheus_timeout,
        idle_query,
        idle_interval,
        positions_interval,
        placement,
        fair_sharing: fair_sharing_mode,
        fair_sharing_strategies,
    } = args;
    let identity = identity
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("sluice-controller-{}", std::process::id()));
    let cfg = RunConfig {
        kube_qps,
        kube_burst,
        index: IndexConfig {
            kueue_compat,
            pods_ready_timeout_ms: (!pods_ready_timeout.is_zero()).then_some(millis(pods_ready_timeout)),
            backoff_base_ms: millis(requeue_backoff_base),
            backoff_max_ms: millis(requeue_backoff_max),
            requeue_limit,
            explain_after_ms: millis(explain_after),
            usage_flush_ms: millis(usage_flush_interval).max(1000),
            usage_half_life_ms: Some(millis(usage_half_life)).filter(|&h| h > 0),
            placement: placement.into(),
            fair_sharing: fair_sharing(fair_sharing_mode, fair_sharing_strategies),
            gpu_quota_backstop,
            unqueued_pod_grace_ms: Some(millis(unqueued_gpu_pod_grace)).filter(|&g| g > 0),
            transformations: resource_transformations.0,
            ..IndexConfig::default()
        },
        lease: leader_elect.then(|| LeaseConfig {
            namespace: lease_namespace,
            name: lease_name,
            duration_seconds: lease_duration_seconds.max(2),
        }),
        identity,
        metrics_addr,
        queue_status_interval: queue_status_interval.max(Duration::from_millis(100)),
        explain_qps: sluice_controller::limit::explain_qps(explain_qps, kube_qps),
        idle: IdleSettings {
            prometheus: prometheus_url
                .map(|url| prometheus(url, prometheus_ca_file, prometheus_token_file, prometheus_timeout)),
            query: idle_query,
            interval: idle_interval.max(Duration::from_secs(1)),
        },
        positions_interval: positions_interval.max(Duration::from_secs(1)),
        kueue_workloads: None,
    };
    let discover = Discover {
        integrations,
        kueue_workloads: kueue_usage == KueueUsage::Count && !kueue_compat,
    };
    (log, cfg, discover)
}

/// Where idle-GPU reclaim asks Prometheus, and how.
fn prometheus(
    url: String,
    ca_file: Option<std::path::PathBuf>,
    token_file: Option<std::path::PathBuf>,
    timeout: Duration,
) -> PromSettings {
    PromSettings {
        ca_file,
        token_file,
        timeout: timeout.max(Duration::from_millis(100)),
        ..PromSettings::new(url)
    }
}

/// Connects, discovers the kinds to queue (and Kueue's Workloads when they
/// count), and runs the controller until it is terminated.
async fn start(mut cfg: RunConfig, discover: Discover) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let requested = match &discover.integrations {
        Integrations::Auto => None,
        Integrations::Listed(kinds) => Some(kinds.as_slice()),
    };
    cfg.index.integrations = sluice_controller::run::integrations(&client, requested)
        .await
        .context("integrations")?;
    cfg.index.pod_gates = sluice_controller::run::pod_gates(&client).await;
    if discover.kueue_workloads {
        cfg.kueue_workloads = sluice_controller::run::kueue_workloads(&client)
            .await
            .context("Kueue's Workloads")?;
        cfg.index.kueue_workloads = cfg.kueue_workloads.as_ref().map(|ar| ar.api_version.clone());
    }
    sluice_controller::run::run(client, cfg, terminated())
        .await
        .context("controller")
}

/// Completes on SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parsed(flags: &[&str]) -> Result<FairSharing, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("sluice").chain(flags.iter().copied()))?;
        Ok(fair_sharing(cli.args.fair_sharing, cli.args.fair_sharing_strategies))
    }

    /// `--requeue-limit` counts every eviction the controller decides, idle
    /// reclaim included, and its help says so.
    #[test]
    fn the_requeue_limit_help_names_both_kinds_of_eviction_it_counts() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let help = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("requeue-limit"))
            .and_then(|a| a.get_long_help().or(a.get_help()))
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(help.contains("pods-ready timeouts"), "{help}");
        assert!(help.contains("idle-GPU reclaim"), "{help}");
    }

    /// `--integrations`' help names every kind of the registry but batch/v1
    /// Job (always queued).
    #[test]
    fn the_integrations_help_names_every_kind() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let help = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some("integrations"))
            .and_then(|a| a.get_long_help().or(a.get_help()))
            .map(ToString::to_string)
            .unwrap_or_default();
        for kind in sluice_kinds::JobKind::others() {
            assert!(help.contains(kind.flag_name()), "{}: {help}", kind.flag_name());
        }
    }

    #[test]
    fn fair_sharing_is_on_with_both_strategies_unless_told_otherwise() {
        use FairShareStrategies::*;
        let cases: [(&[&str], FairSharing); 6] = [
            (&[], FairSharing::On { strategies: Both }),
            (&["--fair-sharing=off"], FairSharing::Off),
            (&["--fair-sharing=on"], FairSharing::On { strategies: Both }),
            (
                &["--fair-sharing-strategies=LessThanInitialShare"],
                FairSharing::On {
                    strategies: LessThanInitialShare,
                },
            ),
            (
                &["--fair-sharing-strategies", " LessThanOrEqualToFinalShare "],
                FairSharing::On {
                    strategies: LessThanOrEqualToFinalShare,
                },
            ),
            (
                &["--fair-sharing-strategies=LessThanOrEqualToFinalShare,LessThanInitialShare"],
                FairSharing::On { strategies: Both },
            ),
        ];
        for (flags, want) in cases {
            assert_eq!(parsed(flags).unwrap(), want, "{flags:?}");
        }
        assert_eq!(FairSharing::On { strategies: Both }, FairSharing::default());
    }

    #[test]
    fn placement_and_kueue_usage_become_the_engines_modes_at_the_edge() {
        let args = |flags: &[&str]| {
            Cli::try_parse_from(std::iter::once("sluice").chain(flags.iter().copied())).map(|c| c.args)
        };
        let mode = |a: &ControllerArgs| sluice_scheduler::PlacementMode::from(a.placement);
        assert_eq!(mode(&args(&[]).unwrap()), sluice_scheduler::PlacementMode::Nodes);
        assert_eq!(
            mode(&args(&["--placement=quota-only"]).unwrap()),
            sluice_scheduler::PlacementMode::QuotaOnly
        );
        assert_eq!(args(&[]).unwrap().kueue_usage, KueueUsage::Count);
        assert_eq!(args(&["--kueue-usage=ignore"]).unwrap().kueue_usage, KueueUsage::Ignore);
        let Err(err) = args(&["--placement=quota"]) else {
            panic!("--placement=quota was taken")
        };
        let err = err.to_string();
        assert!(err.contains("possible values: nodes, quota-only"), "{err}");
    }

    #[test]
    fn a_bad_strategy_list_is_refused_with_what_is_known() {
        for (value, message) in [
            (
                "Fastest",
                "unknown strategy \"Fastest\" (known: LessThanOrEqualToFinalShare, LessThanInitialShare)",
            ),
            (
                "LessThanInitialShare,LessThanOrEqualToFinalShare",
                "give LessThanOrEqualToFinalShare, LessThanInitialShare, or both in that order (each once)",
            ),
            (
                "LessThanInitialShare,LessThanInitialShare",
                "or both in that order (each once)",
            ),
            (",", "name at least one strategy"),
        ] {
            let err = parse_strategies(value).unwrap_err();
            assert!(err.contains(message), "{value}: {err}");
        }
        assert!(parsed(&["--fair-sharing=maybe"]).is_err());
    }
}
