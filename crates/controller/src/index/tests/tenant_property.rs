//! A property: whatever a tenant does to a queued Job (scale it up or down,
//! suspend it), the pods it runs never exceed what its workload admitted
//! for longer than one reconcile, and the ledger never holds more than the
//! ClusterQueue's quota.
//!
//! A small world: the index, the API server (the Job and its Workload as
//! stored, the index's writes applied in order), and the job controller
//! (a Job that is not suspended runs `min(parallelism, completions)` pods;
//! a suspended one none). A round is one tenant action, then the job
//! controller, then the index seeing the Job and its writes landing, twice.

use proptest::prelude::*;

use super::*;

const QUOTA: u32 = 8;

#[derive(Clone, Debug)]
enum Tenant {
    Scale(i32),
    Suspend,
    Nothing,
}

fn tenant() -> impl Strategy<Value = Tenant> {
    prop_oneof![
        4 => (1..14i32).prop_map(Tenant::Scale),
        1 => Just(Tenant::Suspend),
        2 => Just(Tenant::Nothing),
    ]
}

struct World {
    ix: Index,
    job: Job,
    workload: Option<Workload>,
    now: i64,
    uids: u32,
}

impl World {
    fn new(pods: i32) -> Self {
        let mut ix = ready_index();
        let mut job = mk_job("train", "team-a", pods, 1);
        job.spec.as_mut().unwrap().completions = Some(16);
        ix.apply_job(job.clone(), T0);
        let mut w = Self {
            ix,
            job,
            workload: None,
            now: T0,
            uids: 0,
        };
        w.land();
        w
    }

    fn active(&self) -> i32 {
        self.job.status.as_ref().and_then(|s| s.active).unwrap_or(0)
    }

    /// The job controller: pods follow the spec.
    fn job_controller(&mut self) {
        let spec = self.job.spec.as_ref().unwrap();
        let active = if spec.suspend == Some(true) {
            0
        } else {
            sluice_kinds::job::pods_count(spec.parallelism, spec.completions)
        };
        self.job.status = Some(k8s_openapi::api::batch::v1::JobStatus {
            active: Some(active),
            ..Default::default()
        });
    }

    /// The index sees the Job, runs a cycle, and its writes land.
    fn observe(&mut self) {
        self.now += 1000;
        self.ix.apply_job(self.job.clone(), self.now);
        self.land();
        let (plans, _) = self.ix.cycle(self.now);
        self.apply(plans);
        self.land();
    }

    fn land(&mut self) {
        for _ in 0..4 {
            let plans = self.ix.take_plans();
            if plans.is_empty() {
                return;
            }
            self.apply(plans);
        }
    }

    fn apply(&mut self, plans: Vec<Plan>) {
        for plan in plans {
            for step in plan.steps {
                self.step(step);
            }
        }
    }

    fn step(&mut self, step: Step) {
        match step {
            Step::PatchJob {
                patch: sluice_kinds::ObjPatch::Merge(p),
                ..
            } => {
                let mut v = serde_json::to_value(&self.job).unwrap();
                json_patch::merge(&mut v, &p);
                self.job = serde_json::from_value(v).unwrap();
            }
            Step::ApplyWorkload(wl) => {
                let mut wl = *wl;
                self.uids += 1;
                wl.metadata.uid = Some(format!("wl-{}", self.uids));
                wl.metadata.creation_timestamp = Some(time_of(self.now));
                self.workload = Some(wl.clone());
                self.ix.apply_workload(wl, self.now);
            }
            Step::ApplyWorkloadStatus { status, .. } => {
                if let Some(wl) = self.workload.as_mut() {
                    wl.status = Some(*status);
                    let wl = wl.clone();
                    self.ix.apply_workload(wl, self.now);
                }
            }
            Step::DeleteWorkload { key, .. } => {
                self.workload = None;
                self.ix.delete_workload(&key, self.now);
            }
            Step::ConfirmPodsGone { .. } => {
                if let (0, Some(uid)) = (self.active(), self.uid()) {
                    self.ix.pods_gone(&uid, self.now);
                }
            }
            _ => {}
        }
    }

    fn uid(&self) -> Option<String> {
        self.workload.as_ref().and_then(|w| w.metadata.uid.clone())
    }

    /// Pods the workload's admission covers (none unless admitted).
    fn admitted_pods(&self) -> u32 {
        let Some(uid) = self.uid() else { return 0 };
        match self.ix.engine().workload_state(&uid) {
            Some(WorkloadState::Admitted | WorkloadState::Evicting) => self
                .ix
                .engine()
                .admission(&uid)
                .map_or(0, |a| a.pod_sets.iter().map(|p| p.count).sum()),
            _ => 0,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn a_tenant_never_runs_more_pods_than_admitted_for_longer_than_a_reconcile(
        start in 1..6i32,
        actions in proptest::collection::vec(tenant(), 1..12),
    ) {
        let mut w = World::new(start);
        for _ in 0..2 {
            w.job_controller();
            w.observe();
        }
        for action in actions {
            let spec = w.job.spec.as_mut().unwrap();
            match action {
                Tenant::Scale(p) => spec.parallelism = Some(p),
                Tenant::Suspend => spec.suspend = Some(true),
                Tenant::Nothing => {}
            }
            // One reconcile of grace: the job controller may act first.
            w.job_controller();
            w.observe();
            // Then the pods follow what Sluice did.
            w.job_controller();
            w.observe();
            w.job_controller();
            let (active, admitted) = (w.active(), w.admitted_pods());
            prop_assert!(
                i64::from(active) <= i64::from(admitted),
                "{active} pods run, {admitted} admitted, after {action:?}; job spec {:?}",
                w.job.spec.as_ref().map(|s| (s.parallelism, s.suspend))
            );
            let used = w.ix.engine().cluster_queue_usage("cluster-gpu").unwrap().resources[0].used;
            prop_assert!(used <= i64::from(QUOTA) * 1000, "{used} used of {QUOTA}");
            w.ix.engine().check_consistency().map_err(TestCaseError::fail)?;
        }
    }
}
