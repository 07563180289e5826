//! Every sentence Sluice tells users about the engine's decisions: why a
//! workload waits (conditions, `status.pending`, the simulator's report),
//! why it was preempted or evicted (conditions and Events). The engine
//! returns structure only; the controller and the simulator both word it
//! here, so a message reads the same on a cluster and in a simulation.

use std::fmt::Write;

use sluice_api::quantity;

use sluice_scheduler::{
    Amount, Backfilled, BudgetAction, Eviction, EvictionReason, Explanation, FlavorVerdict, Millis, PendingReason,
    Preemption, PreemptionReason, ReservationMoved, ReservedStart, Verdict,
};

/// Formats an amount of `resource` in engine units for people: `8`,
/// `500m`, `64Gi`; GPU-equivalents as decimals (`0.143`, `2.5`).
pub fn amount(resource: &str, units: Amount) -> String {
    let per = quantity::units_per_whole(resource);
    if per != 1000 {
        return equivalents(i128::from(units), per);
    }
    let milli = units;
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    const BINARY: [(i64, &str); 4] = [(1 << 50, "Pi"), (1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi")];
    for (size, suffix) in BINARY {
        if units != 0 && units % size == 0 {
            return format!("{}{suffix}", units / size);
        }
    }
    units.to_string()
}

/// Whole units to three decimals at most, trailing zeros dropped.
fn equivalents(units: i128, per: i128) -> String {
    let thousandths = (units * 1000 + per / 2 * units.signum()) / per;
    let sign = if thousandths < 0 { "-" } else { "" };
    let t = thousandths.unsigned_abs();
    let frac = format!("{:03}", t % 1000);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{}", t / 1000)
    } else {
        format!("{sign}{}.{frac}", t / 1000)
    }
}

/// What grew beyond an admission ([`sluice_scheduler::shape`]), e.g.
/// "pod set main runs 8 pods, 2 admitted".
pub fn growth(g: &sluice_scheduler::shape::Growth) -> String {
    use sluice_scheduler::shape::Grown;
    let ps = &g.pod_set;
    match &g.what {
        Grown::Pods { now, admitted } => format!("pod set {ps} runs {now} pods, {admitted} admitted"),
        Grown::PodSet { now } => format!("pod set {ps} runs {now} pods, none admitted"),
        Grown::PerPod {
            resource,
            now,
            admitted,
        } => format!(
            "a pod of pod set {ps} asks for {} {resource}, {} admitted per pod",
            amount(resource, *now),
            amount(resource, *admitted)
        ),
    }
}

/// Why one flavor did not take a pod set.
pub fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::FlavorNotFound => "flavor not found".to_string(),
        Verdict::UntoleratedTaint { taint } => format!("untolerated taint {taint}"),
        Verdict::NodeLabelMismatch {
            key,
            wanted,
            flavor_has,
        } => format!("node selector {key}={wanted} does not match flavor label {key}={flavor_has}"),
        Verdict::InsufficientQuota {
            resource,
            needed,
            up_to,
            free_nominal,
            nominal,
            borrowable,
        } => format!(
            "{}, {} free of {} nominal, {} borrowable",
            needs(*needed, *up_to, resource),
            amount(resource, *free_nominal),
            amount(resource, *nominal),
            amount(resource, *borrowable)
        ),
        Verdict::ExceedsMaxQuota {
            resource,
            needed,
            up_to,
            max,
        } => format!(
            "{}, more than the {} this queue can ever use",
            needs(*needed, *up_to, resource),
            amount(resource, *max)
        ),
        Verdict::NeverOnNodes(n) => never_on_nodes(n),
        Verdict::WholeGpusOnly => {
            "its nodes give whole GPUs and the pod set asks for a replica of a shared one".to_string()
        }
        Verdict::SharedGpusOnly { replicas } => format!(
            "its nodes share each GPU among {replicas} replicas and the pod set asks for whole GPUs (select nvidia.com/gpu.sharing-strategy to ask for a replica)"
        ),
        Verdict::PreemptionNotPossible { protected } if *protected > 0 => {
            format!("insufficient quota and no preemptible workloads ({protected} protected by minimum runtime)")
        }
        Verdict::PreemptionNotPossible { .. } => {
            "insufficient quota and no workloads the preemption policy allows to preempt".to_string()
        }
        Verdict::NoNodeFits {
            resource,
            per_pod,
            pods,
            placeable,
            quota_free,
            nominal,
            nodes,
            largest_free,
            largest_node,
            topology,
        } => {
            let quota = format!(
                "fits quota ({} of {} {resource} free)",
                amount(resource, *quota_free),
                amount(resource, *nominal)
            );
            let within = match topology {
                Some(key) => format!(" within one {key} domain"),
                None => String::new(),
            };
            let room = if *pods == 1 {
                format!(
                    "none of its {nodes} node(s) has {} {resource} free{within}",
                    amount(resource, *per_pod)
                )
            } else {
                format!(
                    "only {placeable} of {pods} pods ({} {resource} each) fit on its {nodes} node(s){within}",
                    amount(resource, *per_pod)
                )
            };
            let largest = match largest_node {
                Some(node) => format!("largest free block: {} on {node}", amount(resource, *largest_free)),
                None => "no node matches".to_string(),
            };
            format!("{quota} but {room}; {largest}")
        }
    }
}

/// "needs 8 nvidia.com/gpu", or with a minimum count "needs at least 3
/// nvidia.com/gpu (up to 8)".
fn needs(needed: Amount, up_to: Option<Amount>, resource: &str) -> String {
    match up_to {
        Some(most) => format!(
            "needs at least {} {resource} (up to {})",
            amount(resource, needed),
            amount(resource, most)
        ),
        None => format!("needs {} {resource}", amount(resource, needed)),
    }
}

/// Why no node of a flavor could ever hold a pod set.
fn never_on_nodes(n: &sluice_scheduler::NeverOnNodes) -> String {
    let resource = &n.resource;
    let within = match &n.topology {
        Some(key) => format!(" within one {key} domain"),
        None => String::new(),
    };
    if n.nodes == 0 {
        return "no node matches its flavor's labels, its node selector and its tolerations".to_string();
    }
    let largest = match &n.largest_node {
        Some(node) => format!("the largest has {} allocatable ({node})", amount(resource, n.largest)),
        None => String::new(),
    };
    if n.placeable == 0 {
        format!(
            "a pod needs {} {resource}; none of its {} node(s) has that much allocatable: {largest}",
            amount(resource, n.per_pod),
            n.nodes
        )
    } else {
        format!(
            "its {} node(s) hold only {} of its {} pods ({} {resource} each){within} even with nothing else running; {largest}",
            n.nodes,
            n.placeable,
            n.pods,
            amount(resource, n.per_pod)
        )
    }
}

/// The coarse reason a workload waits, as a sentence.
pub fn pending_reason(reason: &PendingReason) -> String {
    match reason {
        PendingReason::Queued => "queued, waiting for the next admission cycle".to_string(),
        PendingReason::LocalQueueMissing { local_queue } => format!("LocalQueue {local_queue} does not exist"),
        PendingReason::ClusterQueueMissing { cluster_queue } => format!("ClusterQueue {cluster_queue} does not exist"),
        PendingReason::Held { by_local_queue: true } => "the LocalQueue is stopped".to_string(),
        PendingReason::Held { by_local_queue: false } => "the ClusterQueue is stopped".to_string(),
        PendingReason::ResourceNotCovered { pod_set, resource } => {
            format!("pod set {pod_set} requests {resource}, which no resource group of the ClusterQueue covers")
        }
        PendingReason::NoFit => "insufficient quota".to_string(),
        PendingReason::NeverFits => "exceeds what the ClusterQueue can ever admit".to_string(),
        PendingReason::BlockedByHead => {
            "StrictFIFO: waiting for the head of the ClusterQueue to be admitted".to_string()
        }
        PendingReason::WaitingForPreemption { victims } => {
            format!("waiting for {victims} preempted workload(s) to release their quota")
        }
        PendingReason::WaitingForEvictions => "waiting for evictions under way to release quota".to_string(),
        PendingReason::NoPlacement => "fits quota but not the nodes".to_string(),
        PendingReason::NeverPlaceable => {
            "no node could ever hold it, even with nothing else running: more quota or waiting does not help"
                .to_string()
        }
        PendingReason::Backoff { until } => format!("requeued after eviction, backing off until t={until}ms"),
        PendingReason::Reserved {
            start,
            backfilled,
            nodes,
        } => {
            format!(
                "first in its queue and does not fit: its quota is reserved from {}{}; {backfilled} smaller workload(s) admitted meanwhile that do not delay it",
                reserved_start(*start),
                reserved_nodes(nodes)
            )
        }
        PendingReason::WouldDelayReservation {
            reserved_for,
            start,
            declared,
        } => {
            let own = match declared {
                Some(ms) => format!("it declares a run time of {}", span(*ms)),
                None => "it declares no run time (sluice.dev/expected-runtime)".to_string(),
            };
            format!(
                "fits now, but would delay {reserved_for}, which holds a reservation from {}: {own}, and what it asks leaves too little for the reservation",
                reserved_start(*start)
            )
        }
        PendingReason::BudgetSpent(b) => format!(
            "the ClusterQueue's budget stops new admissions: it spent {} of {}{} this period ({}), and stops at {}",
            resource_hours(b.spent, &b.resource),
            b.resource,
            b.flavor.as_ref().map(|f| format!(" on {f}")).unwrap_or_default(),
            b.period,
            resource_hours(b.stop_at, &b.resource)
        ),
        PendingReason::BudgetWouldOverrun(b) => format!(
            "fits now, but its declared run time would overrun the ClusterQueue's budget ({}): {} {} × {} = {}, and {} is left before the budget stops the queue",
            b.period,
            amount(&b.resource, b.held),
            b.resource,
            span(b.runtime),
            resource_hours(i128::from(b.held) * i128::from(b.runtime), &b.resource),
            resource_hours(b.left, &b.resource)
        ),
    }
}

/// The Event reason of a budget action.
pub fn budget_reason(a: BudgetAction) -> &'static str {
    match a {
        BudgetAction::Warn => "BudgetWarn",
        BudgetAction::Deprioritize => "BudgetDeprioritize",
        BudgetAction::Stop => "BudgetStop",
    }
}

/// What a budget action does, as a sentence's start.
pub fn budget_effect(a: BudgetAction) -> &'static str {
    match a {
        BudgetAction::Warn => "Budget warning",
        BudgetAction::Deprioritize => {
            "Budget deprioritizes the queue: its workloads come after every other queue's of its cohort, and it may not borrow"
        }
        BudgetAction::Stop => "Budget stops the queue: nothing new is admitted, admitted work runs on",
    }
}

/// Engine units of `resource` × milliseconds as resource-hours: `12.5
/// GPU-hours`, `3.25 cpu-hours`; three decimals at most.
pub fn resource_hours(amount_ms: i128, resource: &str) -> String {
    let unit = match resource {
        "nvidia.com/gpu" | "amd.com/gpu" => "GPU",
        quantity::GPU_EQUIVALENT => "GPU-equivalent",
        other => other,
    };
    format!(
        "{} {unit}-hours",
        decimal_hours(quantity::to_milli(resource, amount_ms))
    )
}

/// Milli-units × milliseconds as hours of one unit, with at most three
/// decimals, trailing zeros dropped (`12.5`, `0.017`, `3`); rounded down.
pub fn decimal_hours(amount_ms: i128) -> String {
    hours_with(amount_ms, 3)
}

/// Milli-units × milliseconds as hours of one unit with at most
/// `decimals` decimals (1 to 6), trailing zeros dropped; rounded toward
/// zero.
pub fn hours_with(amount_ms: i128, decimals: u32) -> String {
    // 3 600 milli-units × ms are a millionth of a unit-hour.
    let per = 3_600 * 10i128.pow(6 - decimals);
    let scale = 10u128.pow(decimals);
    let n = amount_ms / per;
    let sign = if n < 0 { "-" } else { "" };
    let m = n.unsigned_abs();
    let frac = format!("{:0width$}", m % scale, width = decimals as usize);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{}", m / scale)
    } else {
        format!("{sign}{}.{frac}", m / scale)
    }
}

/// When a reservation starts, as a sentence's object.
pub fn reserved_start(start: ReservedStart) -> String {
    match start {
        ReservedStart::At(ms) => format!("~{}", instant(ms)),
        ReservedStart::AfterUndeclared => "when admitted work that declared no run time ends".to_string(),
    }
}

/// The nodes a reservation's pods go on at its start (nothing without
/// node placement): ", with room on 4 nodes of h100-80gb in
/// nvidia.com/gpu.clique=nvl-1".
pub fn reserved_nodes(nodes: &[sluice_scheduler::ReservedNodes]) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let each: Vec<String> = nodes
        .iter()
        .map(|n| {
            let domain = n
                .domain
                .as_ref()
                .map(|d| format!(" in {}={}", d.key, d.value))
                .unwrap_or_default();
            let plural = if n.nodes == 1 { "node" } else { "nodes" };
            format!("{} {plural} of {}{domain}", n.nodes, n.flavor)
        })
        .collect();
    format!(", with room on {}", each.join(" and "))
}

/// Why a workload was admitted behind a reservation.
pub fn backfilled(b: &Backfilled) -> String {
    if b.delay > 0 {
        return format!(
            "backfilled: it starts the reservation of {} {} later, within its ClusterQueue's backfill.maxDelayMinutes",
            b.reserved_for,
            span(b.delay)
        );
    }
    let how = if b.ends_before {
        "its declared run time ends before"
    } else {
        "it fits beside"
    };
    format!(
        "backfilled: {how} the reservation of {} from {}",
        b.reserved_for,
        reserved_start(b.start)
    )
}

/// The reason of the Event on a head whose reservation moved.
pub const RESERVATION_MOVED: &str = "ReservationMoved";

/// A reservation that starts later than its head was told (its Event):
/// "its reservation now starts ~… instead of ~…: ns/a, ns/b went ahead of
/// it (of higher priority, queued earlier, or in another queue within its
/// nominal quota)".
pub fn reservation_moved(m: &ReservationMoved) -> String {
    let why = if m.ahead.is_empty() {
        "admitted work runs past its declared run time, or quota or nodes were taken away".to_string()
    } else {
        let names: Vec<&str> = m.ahead.iter().map(|n| &**n).collect();
        format!(
            "{} went ahead of it (higher priority, queued earlier, another queue within its nominal quota, \
             or let ahead within backfill.maxDelayMinutes)",
            names.join(", ")
        )
    };
    format!(
        "its reservation now starts {} instead of {}: {why}",
        reserved_start(m.to),
        reserved_start(m.from)
    )
}

/// An engine time: UTC when it is a wall-clock time (epoch milliseconds,
/// as the controller's), else the offset from a simulation's start.
pub fn instant(ms: Millis) -> String {
    const Y2000_MS: Millis = 946_684_800_000;
    if ms >= Y2000_MS
        && let Ok(t) = k8s_openapi::jiff::Timestamp::from_millisecond(ms)
    {
        return t.strftime("%Y-%m-%d %H:%M UTC").to_string();
    }
    format!("t={}", span(ms))
}

/// A duration in hours and minutes ("1h05m", "45m", "30s").
pub fn span(ms: Millis) -> String {
    let secs = ms.max(0) / 1000;
    match (secs / 3600, secs % 3600 / 60) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m"),
        (h, m) => format!("{h}h{m:02}m"),
    }
}

/// The whole explanation: the reason, then every flavor's verdict grouped
/// by pod set ("insufficient quota; pod set main: a100: needs 16
/// nvidia.com/gpu, 6 free of 24 nominal, 4 borrowable").
pub fn explanation(e: &Explanation) -> String {
    let mut out = pending_reason(&e.reason);
    let mut pod_set: Option<&str> = None;
    for v in &e.flavors {
        if v.pod_set.is_empty() {
            // Not about one pod set (e.g. why preemption could not help).
            let _ = write!(out, "; {}: {}", v.flavor, verdict(&v.verdict));
            pod_set = None;
            continue;
        }
        if pod_set != Some(v.pod_set.as_str()) {
            let _ = write!(out, "; pod set {}:", v.pod_set);
            pod_set = Some(&v.pod_set);
        } else {
            out.push(',');
        }
        let _ = write!(out, " {}: {}", v.flavor, verdict(&v.verdict));
    }
    out
}

/// The explanation without its per-pod-set detail (which `status.pending`
/// lists per flavor): the reason and any verdicts not about one pod set
/// that come before the first pod set's.
pub fn explanation_summary(e: &Explanation) -> String {
    let mut out = pending_reason(&e.reason);
    for v in e.flavors.iter().take_while(|v| v.pod_set.is_empty()) {
        let _ = write!(out, "; {}: {}", v.flavor, verdict(&v.verdict));
    }
    out
}

/// One flavor's verdict for one pod set ("pod set main: untolerated taint …");
/// a verdict about no one pod set (preemption's) is the verdict alone.
pub fn flavor_verdict(v: &FlavorVerdict) -> String {
    if v.pod_set.is_empty() {
        return verdict(&v.verdict);
    }
    format!("pod set {}: {}", v.pod_set, verdict(&v.verdict))
}

/// Why a victim was preempted, naming its preemptor as users know it
/// (`namespace/name`). Says "higher priority" only when it is: under
/// `LowerOrNewerEqualPriority` the preemptor may have the same priority.
pub fn preemption(p: &Preemption, preemptor: &str) -> String {
    let queue = &p.preemptor_cluster_queue;
    let (mine, theirs) = (p.victim_priority, p.preemptor_priority);
    match p.reason {
        PreemptionReason::InClusterQueue if theirs > mine => {
            format!(
                "Preempted to accommodate {preemptor} (higher priority: {theirs} over {mine}) in ClusterQueue {queue}"
            )
        }
        PreemptionReason::InClusterQueue => format!(
            "Preempted to accommodate {preemptor} (same priority {theirs}, queued before this workload) in ClusterQueue {queue}"
        ),
        PreemptionReason::InCohortReclamation => {
            format!("Preempted to accommodate {preemptor}: ClusterQueue {queue} reclaims quota its cohort borrowed")
        }
        PreemptionReason::InCohortReclaimWhileBorrowing => format!(
            "Preempted to accommodate {preemptor}: ClusterQueue {queue} borrows in the cohort at higher priority ({theirs} over {mine})"
        ),
        PreemptionReason::InCohortFairSharing => format!(
            "Preempted to accommodate {preemptor}: fair sharing — even with it, ClusterQueue {queue} has no larger a share of what the cohort lends than this workload's ClusterQueue"
        ),
    }
}

/// Why the engine evicted an admitted workload (its queue's stop policy).
pub fn eviction(e: &Eviction) -> String {
    match e.reason {
        EvictionReason::ClusterQueueStopped => format!("ClusterQueue {} is stopped (HoldAndDrain)", e.queue),
        EvictionReason::LocalQueueStopped => format!("LocalQueue {} is stopped (HoldAndDrain)", e.queue),
        EvictionReason::PodsReadyTimeout => format!("its pods were not all ready in time ({})", e.queue),
        EvictionReason::Deactivated => format!("deactivated ({})", e.queue),
        EvictionReason::BackfillOverrun => format!(
            "admitted ahead of the reservation of {} because its declared run time (sluice.dev/expected-runtime) ended before that started, it ran past that run time and kept the reservation from starting",
            e.queue
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn verdict_of(pod_set: &str, flavor: &str, verdict: Verdict) -> FlavorVerdict {
        FlavorVerdict {
            pod_set: pod_set.into(),
            flavor: flavor.into(),
            verdict,
        }
    }

    #[test]
    fn amounts_read_as_people_write_them() {
        for (milli, text) in [
            (8_000, "8"),
            (500, "500m"),
            (0, "0"),
            (64 * (1i64 << 30) * 1000, "64Gi"),
            (3 * (1i64 << 20) * 1000, "3Mi"),
            (1_000_001, "1000001m"),
        ] {
            assert_eq!(amount("memory", milli), text);
        }
        let eq = quantity::GPU_EQUIVALENT;
        let units = quantity::GPU_EQUIVALENT_UNITS as i64;
        assert_eq!(amount(eq, units / 7), "0.143");
        assert_eq!(amount(eq, units * 5 / 2), "2.5");
        assert_eq!(amount(eq, units * 8), "8");
    }

    #[test]
    fn an_explanation_reads_reason_then_flavors_by_pod_set() {
        let quota = |needed, free, nominal, borrowable| Verdict::InsufficientQuota {
            resource: "nvidia.com/gpu".into(),
            needed,
            up_to: None,
            free_nominal: free,
            nominal,
            borrowable,
        };
        let e = Explanation {
            reason: PendingReason::NoFit,
            flavors: vec![
                verdict_of("trainer", "a100", quota(16_000, 6_000, 24_000, 4_000)),
                verdict_of("trainer", "h100", Verdict::FlavorNotFound),
                verdict_of(
                    "worker",
                    "a100",
                    Verdict::UntoleratedTaint {
                        taint: "nvidia.com/gpu=present:NoSchedule".into(),
                    },
                ),
                verdict_of("", "preemption", Verdict::PreemptionNotPossible { protected: 2 }),
            ],
        };
        assert_eq!(
            explanation(&e),
            "insufficient quota; pod set trainer: a100: needs 16 nvidia.com/gpu, 6 free of 24 nominal, 4 borrowable, \
             h100: flavor not found; pod set worker: a100: untolerated taint nvidia.com/gpu=present:NoSchedule; \
             preemption: insufficient quota and no preemptible workloads (2 protected by minimum runtime)"
        );
        // The summary keeps what is not about one pod set only when it comes first.
        assert_eq!(explanation_summary(&e), "insufficient quota");
        let only_preemption = Explanation {
            reason: PendingReason::NoFit,
            flavors: vec![verdict_of(
                "",
                "preemption",
                Verdict::PreemptionNotPossible { protected: 0 },
            )],
        };
        assert_eq!(
            explanation_summary(&only_preemption),
            "insufficient quota; preemption: insufficient quota and no workloads the preemption policy allows to preempt"
        );
        assert_eq!(flavor_verdict(&e.flavors[1]), "pod set trainer: flavor not found");
        // Preemption's verdict is about no one pod set: no empty "pod set :".
        assert_eq!(
            flavor_verdict(&e.flavors[3]),
            "insufficient quota and no preemptible workloads (2 protected by minimum runtime)"
        );
    }

    #[test]
    fn a_minimum_count_reads_as_at_least_up_to() {
        let v = Verdict::InsufficientQuota {
            resource: "nvidia.com/gpu".into(),
            needed: 3_000,
            up_to: Some(8_000),
            free_nominal: 2_000,
            nominal: 4_000,
            borrowable: 0,
        };
        assert_eq!(
            verdict(&v),
            "needs at least 3 nvidia.com/gpu (up to 8), 2 free of 4 nominal, 0 borrowable"
        );
        let v = Verdict::ExceedsMaxQuota {
            resource: "nvidia.com/gpu".into(),
            needed: 5_000,
            up_to: Some(8_000),
            max: 4_000,
        };
        assert_eq!(
            verdict(&v),
            "needs at least 5 nvidia.com/gpu (up to 8), more than the 4 this queue can ever use"
        );
    }

    #[test]
    fn a_pod_set_no_node_could_hold_says_the_largest_node() {
        let never = |pods, placeable, nodes, largest_node: Option<&str>| {
            Verdict::NeverOnNodes(Box::new(sluice_scheduler::NeverOnNodes {
                resource: "nvidia.com/gpu".into(),
                per_pod: 8_000,
                pods,
                placeable,
                nodes,
                largest: 4_000,
                largest_node: largest_node.map(str::to_string),
                topology: None,
            }))
        };
        assert_eq!(
            verdict(&never(1, 0, 3, Some("gpu-2"))),
            "a pod needs 8 nvidia.com/gpu; none of its 3 node(s) has that much allocatable: the largest has 4 allocatable (gpu-2)"
        );
        assert_eq!(
            verdict(&never(4, 2, 2, Some("gpu-0"))),
            "its 2 node(s) hold only 2 of its 4 pods (8 nvidia.com/gpu each) even with nothing else running; the largest has 4 allocatable (gpu-0)"
        );
        assert_eq!(
            verdict(&never(1, 0, 0, None)),
            "no node matches its flavor's labels, its node selector and its tolerations"
        );
        assert_eq!(
            pending_reason(&PendingReason::NeverPlaceable),
            "no node could ever hold it, even with nothing else running: more quota or waiting does not help"
        );
    }

    #[test]
    fn every_pending_reason_has_a_sentence() {
        let table = [
            (PendingReason::Queued, "queued, waiting for the next admission cycle"),
            (
                PendingReason::LocalQueueMissing {
                    local_queue: "ns/q".into(),
                },
                "LocalQueue ns/q does not exist",
            ),
            (
                PendingReason::ClusterQueueMissing {
                    cluster_queue: "cq".into(),
                },
                "ClusterQueue cq does not exist",
            ),
            (
                PendingReason::Held { by_local_queue: true },
                "the LocalQueue is stopped",
            ),
            (
                PendingReason::Held { by_local_queue: false },
                "the ClusterQueue is stopped",
            ),
            (PendingReason::NeverFits, "exceeds what the ClusterQueue can ever admit"),
            (
                PendingReason::BlockedByHead,
                "StrictFIFO: waiting for the head of the ClusterQueue to be admitted",
            ),
            (
                PendingReason::WaitingForPreemption { victims: 3 },
                "waiting for 3 preempted workload(s) to release their quota",
            ),
            (
                PendingReason::Backoff { until: 5000 },
                "requeued after eviction, backing off until t=5000ms",
            ),
        ];
        for (reason, text) in table {
            assert_eq!(pending_reason(&reason), text);
        }
    }

    fn preempted(reason: PreemptionReason, preemptor_priority: i32, victim_priority: i32) -> Preemption {
        Preemption {
            victim: Arc::from("v"),
            preemptor: Arc::from("p-uid"),
            preemptor_name: Arc::from("ns/train"),
            preemptor_cluster_queue: Arc::from("team-a"),
            reason,
            preemptor_priority,
            victim_priority,
        }
    }

    #[test]
    fn a_preemption_names_its_preemptor_once_and_priorities_truly() {
        use PreemptionReason::*;
        let table = [
            (
                preempted(InClusterQueue, 100, 10),
                "Preempted to accommodate ns/train (higher priority: 100 over 10) in ClusterQueue team-a",
            ),
            // LowerOrNewerEqualPriority: an equal, newer victim.
            (
                preempted(InClusterQueue, 50, 50),
                "Preempted to accommodate ns/train (same priority 50, queued before this workload) in ClusterQueue team-a",
            ),
            (
                preempted(InCohortReclamation, 0, 900),
                "Preempted to accommodate ns/train: ClusterQueue team-a reclaims quota its cohort borrowed",
            ),
            (
                preempted(InCohortReclaimWhileBorrowing, 100, 10),
                "Preempted to accommodate ns/train: ClusterQueue team-a borrows in the cohort at higher priority (100 over 10)",
            ),
        ];
        for (p, text) in table {
            let got = preemption(&p, "ns/train");
            assert_eq!(got, text);
            assert_eq!(got.matches("Preempted to accommodate").count(), 1);
        }
    }

    #[test]
    fn evictions_name_the_stopped_queue() {
        let e = |reason, queue: &str| Eviction {
            uid: Arc::from("u"),
            reason,
            queue: Arc::from(queue),
        };
        assert_eq!(
            eviction(&e(EvictionReason::ClusterQueueStopped, "team-a")),
            "ClusterQueue team-a is stopped (HoldAndDrain)"
        );
        assert_eq!(
            eviction(&e(EvictionReason::LocalQueueStopped, "ns/jobs")),
            "LocalQueue ns/jobs is stopped (HoldAndDrain)"
        );
    }

    #[test]
    fn a_moved_reservation_says_from_when_to_when_and_who_went_ahead() {
        let moved = |ahead: &[&str], to| ReservationMoved {
            uid: Arc::from("u"),
            from: ReservedStart::At(2 * 3_600_000),
            to,
            ahead: ahead.iter().map(|n| Arc::from(*n)).collect(),
        };
        assert_eq!(
            reservation_moved(&moved(&["ns/urgent"], ReservedStart::At(3 * 3_600_000))),
            "its reservation now starts ~t=3h00m instead of ~t=2h00m: ns/urgent went ahead of it (higher priority, \
             queued earlier, another queue within its nominal quota, or let ahead within backfill.maxDelayMinutes)"
        );
        assert_eq!(
            reservation_moved(&moved(&[], ReservedStart::AfterUndeclared)),
            "its reservation now starts when admitted work that declared no run time ends instead of ~t=2h00m: \
             admitted work runs past its declared run time, or quota or nodes were taken away"
        );
    }
}
