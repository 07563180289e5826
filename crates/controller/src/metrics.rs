//! Prometheus metrics of the controller: one registry, every metric
//! prefixed `sluice_`. docs/controller.md's table of them ("Metrics") is
//! [`markdown_table`]'s, made from this registry and `LABELS`; a test
//! keeps the two equal.

use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, String)>;

/// The labels of each registered metric (its name without `sluice_` and
/// `_total`), for the table of docs/controller.md ([`markdown_table`]).
const LABELS: &[(&str, &str)] = &[
    ("pending_workloads", "`cluster_queue`, `status` (active, inadmissible)"),
    ("admitted_workloads", "—"),
    ("evicted_workloads", "`reason`"),
    ("preempted_workloads", "—"),
    ("admission_wait_time_seconds", "—"),
    ("cluster_queue_resource_usage", "`cluster_queue`, `flavor`, `resource`"),
    ("cluster_queue_nominal_quota", "`cluster_queue`, `flavor`, `resource`"),
    (
        "cluster_queue_weighted_share",
        "`cluster_queue` (fair sharing on: its `status.fairSharing.weightedShare`; `+Inf` is written `inf`)",
    ),
    (
        "cohort_weighted_share",
        "`cohort` (fair sharing on: every cohort a Cohort object or a ClusterQueue names)",
    ),
    ("admission_cycle_duration_seconds", "—"),
    (
        "api_writes",
        "`kind` (workload, workload_status, job, job_status, event, queue_status)",
    ),
    ("api_write_errors", "`kind`"),
    (
        "lane_writes",
        "`lane` (state, bookkeeping, explanation; Events are in no lane)",
    ),
    (
        "dropped_writes",
        "`lane` (state, bookkeeping, explanation, event), `reason` (not_leader: this replica is not the leader, or the Lease fence refused the write; superseded: a queued lazy write replaced by a newer one or by a state change of its workload)",
    ),
    ("dropped_events", "—"),
    ("reconcile_errors", "`kind`, `reason`"),
    ("unrestored_workloads", "—"),
    ("pods_over_admission", "—"),
    ("ledger_drift", "`kind` (engine_only, status_only)"),
    ("idle_gpu_workloads", "`cluster_queue`"),
    ("idle_reclaims", "`cluster_queue`, `action` (Warn, Evict, Deactivate)"),
    ("idle_gpu_hours_reclaimed", "—"),
    (
        "idle_check_failures",
        "`reason` (unreachable, timeout, http_status, too_large, malformed, refused, setup, not_configured)",
    ),
    ("usage_resource_hours", "`cluster_queue`, `flavor`, `resource`"),
    (
        "local_queue_usage_resource_hours",
        "`namespace`, `local_queue`, `flavor`, `resource`",
    ),
    ("budget_spent_resource_hours", "`cluster_queue`, `resource`"),
    ("budget_limit_resource_hours", "`cluster_queue`, `resource`"),
    ("budget_projected_resource_hours", "`cluster_queue`, `resource`"),
    ("budget_action", "`cluster_queue`"),
];

/// A registry that also lists what is registered in it, for
/// [`markdown_table`] (the exposition leaves out families without samples).
#[derive(Default)]
struct Described {
    registry: Registry,
    /// Name (without the prefix), help and type, in registration order.
    list: Vec<(String, String, MetricType)>,
}

impl Described {
    fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.list
            .push((name.to_string(), help.to_string(), metric.metric_type()));
        self.registry.register(name, help, metric);
    }
}

/// A weighted share as a gauge value: the engine's `i64::MAX` (a queue or
/// cohort that borrows with weight 0) is `+Inf` (the text format writes
/// `inf`, which Prometheus reads as `+Inf`).
pub fn share_value(weighted_share: i64) -> f64 {
    match weighted_share {
        i64::MAX => f64::INFINITY,
        s => s as f64,
    }
}

/// The controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    pub pending: Family<Labels, Gauge>,
    pub admitted: Counter,
    pub evicted: Family<Labels, Counter>,
    pub preempted: Counter,
    pub pods_over_admission: Counter,
    pub unqueued_gpu_pods: Counter,
    pub wait_time: Histogram,
    pub usage: Family<Labels, Gauge>,
    pub nominal: Family<Labels, Gauge>,
    pub cluster_queue_share: Family<Labels, Gauge<f64, AtomicU64>>,
    pub cohort_share: Family<Labels, Gauge<f64, AtomicU64>>,
    pub usage_hours: Family<Labels, Gauge<f64, AtomicU64>>,
    pub local_usage_hours: Family<Labels, Gauge<f64, AtomicU64>>,
    pub budget_spent: Family<Labels, Gauge<f64, AtomicU64>>,
    pub budget_limit: Family<Labels, Gauge<f64, AtomicU64>>,
    pub budget_projected: Family<Labels, Gauge<f64, AtomicU64>>,
    pub budget_action: Family<Labels, Gauge>,
    pub cycle_duration: Histogram,
    pub writes: Family<Labels, Counter>,
    pub write_errors: Family<Labels, Counter>,
    pub lane_writes: Family<Labels, Counter>,
    pub dropped_writes: Family<Labels, Counter>,
    pub dropped_events: Counter,
    pub reconcile_errors: Family<Labels, Counter>,
    pub unrestored: Gauge,
    pub drift: Family<Labels, Counter>,
    pub idle_workloads: Family<Labels, Gauge>,
    pub idle_reclaims: Family<Labels, Counter>,
    pub idle_gpu_hours: Counter<f64, AtomicU64>,
    pub idle_check_failures: Family<Labels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// So that a bare registry serves where a holder of one is taken (the
/// writer's tasks take the run loop's shared state).
impl AsRef<Metrics> for Metrics {
    fn as_ref(&self) -> &Metrics {
        self
    }
}

impl Metrics {
    /// Every metric, registered family by family in the order they are
    /// exposed.
    pub fn new() -> Self {
        let m = Self {
            pending: Family::default(),
            admitted: Counter::default(),
            evicted: Family::default(),
            preempted: Counter::default(),
            pods_over_admission: Counter::default(),
            unqueued_gpu_pods: Counter::default(),
            // 1 s .. ~9 h
            wait_time: Histogram::new(exponential_buckets(1.0, 2.0, 16)),
            usage: Family::default(),
            nominal: Family::default(),
            cluster_queue_share: Family::default(),
            cohort_share: Family::default(),
            usage_hours: Family::default(),
            local_usage_hours: Family::default(),
            budget_spent: Family::default(),
            budget_limit: Family::default(),
            budget_projected: Family::default(),
            budget_action: Family::default(),
            // 100 µs .. ~3 s
            cycle_duration: Histogram::new(exponential_buckets(0.000_1, 2.0, 16)),
            writes: Family::default(),
            write_errors: Family::default(),
            lane_writes: Family::default(),
            dropped_writes: Family::default(),
            dropped_events: Counter::default(),
            reconcile_errors: Family::default(),
            unrestored: Gauge::default(),
            drift: Family::default(),
            idle_workloads: Family::default(),
            idle_reclaims: Family::default(),
            idle_gpu_hours: Counter::default(),
            idle_check_failures: Family::default(),
            registry: Registry::default(),
        };
        let mut r = Described {
            registry: Registry::with_prefix("sluice"),
            list: Vec::new(),
        };
        m.register_all(&mut r);
        Self {
            registry: r.registry,
            ..m
        }
    }

    fn register_all(&self, r: &mut Described) {
        self.register_admissions(r);
        self.register_quota(r);
        self.register_budgets(r);
        self.register_writes(r);
        self.register_health(r);
        self.register_idle(r);
    }

    /// Workloads pending, admitted, evicted and preempted, and how long admission took.
    fn register_admissions(&self, r: &mut Described) {
        r.register(
            "pending_workloads",
            "Pending workloads per ClusterQueue",
            self.pending.clone(),
        );
        r.register("admitted_workloads", "Workloads admitted", self.admitted.clone());
        r.register(
            "evicted_workloads",
            "Workloads evicted, by reason",
            self.evicted.clone(),
        );
        r.register("preempted_workloads", "Workloads preempted", self.preempted.clone());
        r.register(
            "pods_over_admission",
            "Admitted workloads whose Jobs ran more pods than admitted for longer than one reconcile",
            self.pods_over_admission.clone(),
        );
        r.register(
            "unqueued_gpu_pods",
            "GPU pods seen running outside the queue in a namespace that queues every object",
            self.unqueued_gpu_pods.clone(),
        );
        r.register(
            "admission_wait_time_seconds",
            "Time from Workload creation to admission",
            self.wait_time.clone(),
        );
    }

    /// Quota used and nominal, and fair-sharing shares.
    fn register_quota(&self, r: &mut Described) {
        r.register(
            "cluster_queue_resource_usage",
            "Quota used per ClusterQueue, flavor and resource (milli-units)",
            self.usage.clone(),
        );
        r.register(
            "cluster_queue_nominal_quota",
            "Nominal quota per ClusterQueue, flavor and resource (milli-units)",
            self.nominal.clone(),
        );
        r.register(
            "cluster_queue_weighted_share",
            "Weighted share of each ClusterQueue in fair sharing (thousandths of what its cohort can lend, divided by its weight; +Inf when it borrows with weight 0)",
            self.cluster_queue_share.clone(),
        );
        r.register(
            "cohort_weighted_share",
            "Weighted share of each cohort in fair sharing (thousandths of what its parent can lend, divided by its weight; +Inf when it borrows with weight 0)",
            self.cohort_share.clone(),
        );
    }

    /// Usage over time and budgets, as of the last flush.
    fn register_budgets(&self, r: &mut Described) {
        r.register(
            "usage_resource_hours",
            "Resource-hours used per ClusterQueue, flavor and resource since accounting began (GPU-hours for GPUs), as of the last flush",
            self.usage_hours.clone(),
        );
        r.register(
            "local_queue_usage_resource_hours",
            "Resource-hours used per LocalQueue, flavor and resource since accounting began, as of the last flush",
            self.local_usage_hours.clone(),
        );
        r.register(
            "budget_spent_resource_hours",
            "Resource-hours a ClusterQueue spent of its budget in the current period",
            self.budget_spent.clone(),
        );
        r.register(
            "budget_limit_resource_hours",
            "Resource-hours a ClusterQueue's budget allows per period",
            self.budget_limit.clone(),
        );
        r.register(
            "budget_projected_resource_hours",
            "Resource-hours a ClusterQueue is projected to spend in the period if what it holds stays held",
            self.budget_projected.clone(),
        );
        r.register(
            "budget_action",
            "The budget action a ClusterQueue reached: 0 none, 1 Warn, 2 Deprioritize, 3 Stop",
            self.budget_action.clone(),
        );
    }

    /// The engine cycle's time and the writer's calls: made, failed, by lane, dropped.
    fn register_writes(&self, r: &mut Described) {
        r.register(
            "admission_cycle_duration_seconds",
            "Time of one engine cycle",
            self.cycle_duration.clone(),
        );
        r.register("api_writes", "API writes made, by kind", self.writes.clone());
        r.register(
            "api_write_errors",
            "API writes that failed, by kind",
            self.write_errors.clone(),
        );
        r.register(
            "lane_writes",
            "API writes made, by lane of the write queue",
            self.lane_writes.clone(),
        );
        r.register(
            "dropped_writes",
            "Writes not made, by lane and reason (not_leader, superseded)",
            self.dropped_writes.clone(),
        );
        r.register(
            "dropped_events",
            "Events dropped because their lane was full",
            self.dropped_events.clone(),
        );
    }

    /// Objects Sluice could not use and ledger repairs.
    fn register_health(&self, r: &mut Described) {
        r.register(
            "reconcile_errors",
            "Malformed or unusable objects seen, by kind and reason",
            self.reconcile_errors.clone(),
        );
        r.register(
            "unrestored_workloads",
            "Admitted Workloads kept out of the ledger because their ClusterQueue is unknown",
            self.unrestored.clone(),
        );
        r.register(
            "ledger_drift",
            "Ledger entries out of step with Workload statuses, repaired by the periodic check",
            self.drift.clone(),
        );
    }

    /// Idle-GPU checks and what they reclaimed.
    fn register_idle(&self, r: &mut Described) {
        r.register(
            "idle_gpu_workloads",
            "Admitted workloads found idle by the last idle-GPU check, per ClusterQueue",
            self.idle_workloads.clone(),
        );
        r.register(
            "idle_reclaims",
            "Actions taken on idle-GPU workloads, by ClusterQueue and action",
            self.idle_reclaims.clone(),
        );
        r.register(
            "idle_gpu_hours_reclaimed",
            "GPUs times idle window of the workloads evicted or deactivated as idle, in hours",
            self.idle_gpu_hours.clone(),
        );
        r.register(
            "idle_check_failures",
            "Idle-GPU checks that judged nothing, by reason",
            self.idle_check_failures.clone(),
        );
    }

    pub fn write(&self, kind: &'static str, ok: bool) {
        let family = if ok { &self.writes } else { &self.write_errors };
        family.get_or_create(&vec![("kind", kind.to_string())]).inc();
    }

    /// A ClusterQueue's weighted share ([`share_value`]).
    pub fn cluster_queue_share(&self, name: &str, weighted_share: i64) {
        self.cluster_queue_share
            .get_or_create(&vec![("cluster_queue", name.to_string())])
            .set(share_value(weighted_share));
    }

    /// Resource-hours a ClusterQueue used since accounting began.
    pub fn usage_hours(&self, cluster_queue: &str, flavor: &str, resource: &str, hours: f64) {
        self.usage_hours
            .get_or_create(&vec![
                ("cluster_queue", cluster_queue.to_string()),
                ("flavor", flavor.to_string()),
                ("resource", resource.to_string()),
            ])
            .set(hours);
    }

    /// Resource-hours a LocalQueue (`namespace/name`) used since
    /// accounting began.
    pub fn local_usage_hours(&self, local_queue: &str, flavor: &str, resource: &str, hours: f64) {
        let (namespace, name) = local_queue.split_once('/').unwrap_or(("", local_queue));
        self.local_usage_hours
            .get_or_create(&vec![
                ("namespace", namespace.to_string()),
                ("local_queue", name.to_string()),
                ("flavor", flavor.to_string()),
                ("resource", resource.to_string()),
            ])
            .set(hours);
    }

    /// A ClusterQueue's budget: spent, limit and projected resource-hours.
    pub fn budget(&self, cluster_queue: &str, resource: &str, spent: f64, limit: f64, projected: f64) {
        let labels = vec![
            ("cluster_queue", cluster_queue.to_string()),
            ("resource", resource.to_string()),
        ];
        self.budget_spent.get_or_create(&labels).set(spent);
        self.budget_limit.get_or_create(&labels).set(limit);
        self.budget_projected.get_or_create(&labels).set(projected);
    }

    /// The budget action a ClusterQueue reached (0 none, 1 Warn, 2
    /// Deprioritize, 3 Stop).
    pub fn budget_action(&self, cluster_queue: &str, action: i64) {
        self.budget_action
            .get_or_create(&vec![("cluster_queue", cluster_queue.to_string())])
            .set(action);
    }

    /// A cohort's weighted share ([`share_value`]).
    pub fn cohort_share(&self, name: &str, weighted_share: i64) {
        self.cohort_share
            .get_or_create(&vec![("cohort", name.to_string())])
            .set(share_value(weighted_share));
    }

    /// A write of `lane` not made (`not_leader`, `superseded`).
    pub fn dropped(&self, lane: &'static str, reason: &'static str) {
        self.dropped_writes
            .get_or_create(&vec![("lane", lane.to_string()), ("reason", reason.to_string())])
            .inc();
    }

    /// What an idle-GPU check did.
    pub fn idle(&self, applied: &crate::index::IdleApplied) {
        for (cq, n) in &applied.idle {
            self.idle_workloads
                .get_or_create(&vec![("cluster_queue", cq.clone())])
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        for (cq, action) in &applied.reclaims {
            self.idle_reclaims
                .get_or_create(&vec![
                    ("cluster_queue", cq.clone()),
                    ("action", action.as_str().to_string()),
                ])
                .inc();
        }
        if applied.gpu_hours_reclaimed > 0.0 {
            self.idle_gpu_hours.inc_by(applied.gpu_hours_reclaimed);
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The metrics as docs/controller.md's table: every registered metric, in
/// registration order, as scraped (`_total` on counters), with its type,
/// its labels (`LABELS`; `?` for one without an entry, which a test
/// refuses) and its help.
pub fn markdown_table() -> String {
    let mut described = Described::default();
    Metrics::new().register_all(&mut described);
    let mut out = String::from("| metric | type | labels | what it counts |\n|---|---|---|---|\n");
    for (name, help, kind) in described.list {
        let labels = LABELS.iter().find(|(n, _)| *n == name).map_or("?", |(_, l)| l);
        let kind = kind.as_str();
        let suffix = if kind == "counter" { "_total" } else { "" };
        out.push_str(&format!("| `sluice_{name}{suffix}` | {kind} | {labels} | {help} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/controller.md carries the table the registry makes, and every
    /// registered metric has its labels in `LABELS` (and nothing else
    /// does). `SLUICE_BLESS=1 cargo test -p sluice-controller --lib metrics`
    /// writes the table there.
    #[test]
    fn the_controller_doc_carries_the_metrics_table() {
        let table = markdown_table();
        assert!(!table.contains("| ? |"), "metrics without an entry in LABELS:\n{table}");
        for (name, _) in LABELS {
            assert!(
                table.contains(&format!("`sluice_{name}`")) || table.contains(&format!("`sluice_{name}_total`")),
                "LABELS names {name}, which is not registered"
            );
        }
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/controller.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (begin, end) = (
            "<!-- metrics: generated by sluice_controller::metrics::markdown_table -->\n",
            "<!-- end metrics -->",
        );
        let start = doc.find(begin).expect("the begin marker") + begin.len();
        let stop = doc.find(end).expect("the end marker");
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[start..stop],
            table,
            "docs/controller.md's metrics table differs from the registry's: run SLUICE_BLESS=1 cargo test -p sluice-controller --lib metrics"
        );
    }

    /// Every `sluice_…` metric a document names is one the controller
    /// exports (the webhook's, `sluice_webhook_…`, are checked by its own
    /// crate): a renamed or removed metric cannot linger in the docs.
    #[test]
    fn the_docs_name_only_exported_metrics() {
        let exported = markdown_table();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
        let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(format!("{root}docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        docs.push(format!("{root}README.md").into());
        let crates = [
            "api",
            "scheduler",
            "convert",
            "kinds",
            "controller",
            "webhook",
            "simulate",
            "import",
            "kubectl",
            "bench",
            "image",
            "e2e",
        ];
        let mut unknown = Vec::new();
        for doc in docs {
            let text = std::fs::read_to_string(&doc).unwrap();
            for (i, _) in text.match_indices("sluice_") {
                let name: String = text[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = &text[i + name.len()..];
                let crate_name = crates.iter().any(|c| name == format!("sluice_{c}"));
                if crate_name || after.starts_with("::") || name.starts_with("sluice_webhook_") {
                    continue;
                }
                // A family named with a wildcard (`sluice_cluster_queue_*`), or a sample
                // of a histogram.
                let family = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name);
                let known = if after.starts_with('*') {
                    exported.contains(&format!("`{name}"))
                } else {
                    exported.contains(&format!("`{family}`"))
                };
                if !known {
                    unknown.push(format!("{}: {name}", doc.display()));
                }
            }
        }
        assert!(
            unknown.is_empty(),
            "documents name metrics the controller does not export: {unknown:?}"
        );
    }

    #[test]
    fn metric_names_are_the_documented_ones() {
        let m = Metrics::new();
        m.admitted.inc();
        m.write("workload_status", true);
        m.evicted.get_or_create(&vec![("reason", "Preempted".into())]).inc();
        m.pending
            .get_or_create(&vec![("cluster_queue", "cq".into()), ("status", "active".into())])
            .set(3);
        m.wait_time.observe(2.0);
        let text = m.encode();
        for line in [
            "sluice_admitted_workloads_total 1",
            "sluice_api_writes_total{kind=\"workload_status\"} 1",
            "sluice_evicted_workloads_total{reason=\"Preempted\"} 1",
            "sluice_pending_workloads{cluster_queue=\"cq\",status=\"active\"} 3",
            "sluice_admission_wait_time_seconds_count 1",
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
    }

    #[test]
    fn weighted_shares_are_gauges_and_an_infinite_share_is_inf() {
        let m = Metrics::new();
        m.cluster_queue_share("team-a", 500);
        m.cluster_queue_share("free-rider", i64::MAX);
        m.cohort_share("research", 0);
        let text = m.encode();
        for line in [
            "# TYPE sluice_cluster_queue_weighted_share gauge",
            "sluice_cluster_queue_weighted_share{cluster_queue=\"team-a\"} 500.0",
            "sluice_cluster_queue_weighted_share{cluster_queue=\"free-rider\"} inf",
            "# TYPE sluice_cohort_weighted_share gauge",
            "sluice_cohort_weighted_share{cohort=\"research\"} 0.0",
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
        assert_eq!(share_value(i64::MAX), f64::INFINITY);
        assert_eq!(share_value(1250), 1250.0);
    }

    #[test]
    fn budgets_and_usage_over_time_are_gauges() {
        let m = Metrics::new();
        m.usage_hours("team-a", "h100", "nvidia.com/gpu", 12.5);
        m.local_usage_hours("ns-a/main", "h100", "nvidia.com/gpu", 2.25);
        m.budget("team-a", "nvidia.com/gpu", 40.0, 50.0, 61.5);
        m.budget_action("team-a", 2);
        let text = m.encode();
        for line in [
            "sluice_usage_resource_hours{cluster_queue=\"team-a\",flavor=\"h100\",resource=\"nvidia.com/gpu\"} 12.5",
            "sluice_local_queue_usage_resource_hours{namespace=\"ns-a\",local_queue=\"main\",flavor=\"h100\",resource=\"nvidia.com/gpu\"} 2.25",
            "sluice_budget_spent_resource_hours{cluster_queue=\"team-a\",resource=\"nvidia.com/gpu\"} 40.0",
            "sluice_budget_limit_resource_hours{cluster_queue=\"team-a\",resource=\"nvidia.com/gpu\"} 50.0",
            "sluice_budget_projected_resource_hours{cluster_queue=\"team-a\",resource=\"nvidia.com/gpu\"} 61.5",
            "sluice_budget_action{cluster_queue=\"team-a\"} 2",
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
    }

    /// Every metric the chart's Grafana dashboard queries is one the
    /// controller registers (read from the registrations below: families
    /// without samples are not in the exposition).
    #[test]
    fn the_dashboard_queries_only_exported_metrics() {
        let source = include_str!("metrics.rs");
        let exported: Vec<String> = source
            .split("r.register(")
            .skip(1)
            .filter_map(|call| call.split('"').nth(1))
            .map(|name| format!("sluice_{name}"))
            .collect();
        assert!(exported.contains(&"sluice_budget_action".to_string()), "{exported:?}");
        let dashboard = include_str!("../../../charts/sluice/files/dashboard.json");
        let mut queried: Vec<&str> = Vec::new();
        let mut rest = dashboard;
        while let Some(i) = rest.find("sluice_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            queried.push(&tail[..end]);
            rest = &tail[end..];
        }
        assert!(queried.contains(&"sluice_budget_action"), "{queried:?}");
        for q in queried {
            let family = ["_total", "_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| q.strip_suffix(suffix))
                .unwrap_or(q);
            assert!(
                exported.iter().any(|e| e == family || e == q),
                "the dashboard queries {q}, which the controller does not export: {exported:?}"
            );
        }
    }
}
