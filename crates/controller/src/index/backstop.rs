//! The GPU quota backstop: in a namespace that queues every object
//! (`sluice.dev/default-queue: enabled`), the API server itself refuses
//! GPU pods beyond what Sluice admitted there, webhook or no webhook.
//!
//! Sluice keeps one ResourceQuota in each such namespace,
//! [`QUOTA_NAME`], whose `requests.<gpu>` hard limits are the GPUs the
//! namespace's admitted workloads hold (every GPU resource a ClusterQueue
//! covers; 0 where nothing is admitted). Kubernetes' ResourceQuota
//! admission counts every pod that is not finished (a terminating one
//! until its grace period ends) and refuses a pod that would exceed it:
//! an owner's unsuspend of a queued Job, a Deployment scaled past its
//! admission while the webhook is down, a bare GPU pod that escaped the
//! webhook, all find their pods refused ("exceeded quota") while what was
//! admitted runs. Pods that already run are never touched.
//!
//! - A raise is written before the admissions that need it: the plan goes
//!   ahead of the cycle's admissions in the state lane, which is written
//!   in order.
//! - A decrease follows a release: a quota only refuses new pods, so
//!   lowering it early costs running pods nothing.
//! - A namespace the cluster admin trusts with GPU system pods
//!   (`sluice.dev/allow-gpu-fixes-skip: "true"`) gets none: its exempt pods
//!   run outside the queue by design. A namespace that stops queueing
//!   every object has its quota deleted.
//! - Every minute each quota is written again (server-side apply, a no-op
//!   when unchanged), so one deleted or edited by hand comes back.
//!
//! Off with `--gpu-quota-backstop=false`.

use std::collections::{BTreeMap, BTreeSet};

use sluice_api::labels;
use sluice_scheduler::WorkloadState;

use super::Index;
use crate::plan::{ObjKey, Plan, Purpose, Step};

/// The name of the ResourceQuota Sluice keeps in a namespace that queues
/// every object.
pub const QUOTA_NAME: &str = "sluice-admitted-gpus";

/// How often every quota is written again.
const REASSERT_MS: i64 = 60_000;

/// The backstop's state: what each namespace's quota was last planned as.
#[derive(Default)]
pub(super) struct Backstop {
    enabled: bool,
    /// Namespace → GPU resource → hard limit (milli-units).
    planned: BTreeMap<String, BTreeMap<String, i64>>,
    next_reassert_ms: i64,
}

impl Backstop {
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }
}

impl Index {
    /// The quota plans this cycle needs, placed at `at` in the outbox
    /// (before the cycle's admissions): a changed limit for each namespace
    /// that queues every object, a deletion where one stopped.
    pub(super) fn plan_backstop(&mut self, at: usize, now_ms: i64) {
        if !self.backstop.enabled {
            return;
        }
        let reassert = now_ms >= self.backstop.next_reassert_ms;
        if reassert {
            self.backstop.next_reassert_ms = now_ms.saturating_add(REASSERT_MS);
        }
        let resources = self.gpu_resources();
        let namespaces = self.backstopped_namespaces();
        let mut plans = Vec::new();
        for ns in &namespaces {
            let hard = self.admitted_gpus(ns, &resources);
            if reassert || self.backstop.planned.get(ns) != Some(&hard) {
                plans.push(quota_plan(ns, &hard));
                self.backstop.planned.insert(ns.clone(), hard);
            }
        }
        let gone: Vec<String> = self
            .backstop
            .planned
            .keys()
            .filter(|ns| !namespaces.contains(*ns))
            .cloned()
            .collect();
        for ns in gone {
            self.backstop.planned.remove(&ns);
            plans.push(Plan {
                purpose: Purpose::GpuQuota,
                steps: vec![Step::DeleteGpuQuota {
                    key: ObjKey::new(ns, QUOTA_NAME),
                }],
            });
        }
        let at = at.min(self.outbox.plans.len());
        self.outbox.plans.splice(at..at, plans);
    }

    /// The namespaces that queue every object and are not trusted with
    /// GPU system pods.
    fn backstopped_namespaces(&self) -> BTreeSet<String> {
        self.defs
            .namespaces
            .iter()
            .filter(|(_, l)| l.get(labels::DEFAULT_QUEUE).map(String::as_str) == Some(labels::DEFAULT_QUEUE_ENABLED))
            .filter(|(_, l)| l.get(labels::ALLOW_GPU_FIXES_SKIP).map(String::as_str) != Some("true"))
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// Every GPU resource a ClusterQueue covers.
    fn gpu_resources(&self) -> BTreeSet<String> {
        self.defs
            .cluster_queues
            .values()
            .flat_map(|cq| cq.spec.resource_groups.iter())
            .flat_map(|g| g.covered_resources.iter())
            .filter(|r| sluice_api::resources::is_gpu(r))
            .cloned()
            .collect()
    }

    /// What the admitted workloads of namespace `ns` hold of each of
    /// `resources` (milli-units; 0 for none).
    fn admitted_gpus(&self, ns: &str, resources: &BTreeSet<String>) -> BTreeMap<String, i64> {
        let mut hard: BTreeMap<String, i64> = resources.iter().map(|r| (r.clone(), 0)).collect();
        let from = ObjKey::new(ns, "");
        for (_, e) in self
            .table
            .workloads
            .range(from..)
            .take_while(|(k, _)| k.namespace == ns)
        {
            if !e.run.in_engine
                || !matches!(
                    self.engine.workload_state(&e.uid),
                    Some(WorkloadState::Admitted | WorkloadState::Evicting)
                )
            {
                continue;
            }
            let Some(adm) = self.engine.admission(&e.uid) else {
                continue;
            };
            for (r, amount) in adm.pod_sets.iter().flat_map(|p| p.usage.iter()) {
                if let Some(h) = hard.get_mut(r) {
                    *h += *amount;
                }
            }
        }
        hard
    }
}

/// The plan that writes namespace `ns`'s quota with limits `hard`.
fn quota_plan(ns: &str, hard: &BTreeMap<String, i64>) -> Plan {
    let hard: BTreeMap<String, String> = hard
        .iter()
        .map(|(r, milli)| (format!("requests.{r}"), quantity(*milli)))
        .collect();
    Plan {
        purpose: Purpose::GpuQuota,
        steps: vec![Step::ApplyGpuQuota {
            key: ObjKey::new(ns, QUOTA_NAME),
            hard,
        }],
    }
}

/// Milli-units as a Kubernetes quantity (`4`, `1500m`).
fn quantity(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

#[cfg(test)]
mod tests {
    use super::quantity;

    #[test]
    fn quantities_are_whole_where_they_can_be() {
        assert_eq!(quantity(4000), "4");
        assert_eq!(quantity(0), "0");
        assert_eq!(quantity(1500), "1500m");
    }
}
