//! The checks after every step, the final drain, and the placement
//! oracle for empty nodes.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use sluice_scheduler::*;

use super::world::*;

impl Model {
    /// (now, later) of node `n` without foreign pods (`bare`) or with them.
    pub fn committed(&self, n: usize, bare: bool) -> (Res, Res) {
        let (mut now, mut later) = if bare {
            ([0; 3], [0; 3])
        } else {
            let (used, term) = self.foreign[n];
            (used, [used[0] - term[0], used[1] - term[1], used[2] - term[2]])
        };
        for (uid, w) in &self.wls {
            let state = self.e.workload_state(uid);
            for (m, r) in &w.bound {
                if *m == n {
                    (0..3).for_each(|i| now[i] += r[i]);
                    if w.phase == Phase::Admitted {
                        (0..3).for_each(|i| later[i] += r[i]);
                    }
                }
            }
            if !w.bound.is_empty() {
                continue;
            }
            let (in_now, in_later) = match state {
                Some(WorkloadState::Admitted) => (true, true),
                Some(WorkloadState::Evicting) => (true, false),
                Some(WorkloadState::Preempting) => (false, true),
                _ => continue,
            };
            for (m, r) in self.plan(uid) {
                if m == n {
                    (0..3).for_each(|i| {
                        now[i] += r[i] * in_now as i64;
                        later[i] += r[i] * in_later as i64;
                    });
                }
            }
        }
        (now, later)
    }

    pub fn check(&mut self, engine_step: bool) -> Result<(), TestCaseError> {
        self.e.check_consistency().map_err(TestCaseError::fail)?;
        self.check_quota()?;
        self.check_placements()?;
        for n in 0..self.nodes.len() {
            let alloc = self.alloc(n);
            let (now, later) = self.committed(n, false);
            for r in 0..3 {
                let excess = ((now[r] - alloc[r]).max(0), (later[r] - alloc[r]).max(0));
                let before = self.excess[n][r];
                if self.strict {
                    prop_assert_eq!(
                        excess,
                        (0, 0),
                        "n{} {} over-committed: now {} later {} of {}",
                        n,
                        RES[r],
                        now[r],
                        later[r],
                        alloc[r]
                    );
                }
                if engine_step {
                    prop_assert!(
                        excess.0 <= before.0 && excess.1 <= before.1,
                        "n{} {}: excess (now, later) grew from {:?} to {:?}",
                        n,
                        RES[r],
                        before,
                        excess
                    );
                }
                self.excess[n][r] = excess;
            }
            // Bookkeeping: the engine reserves exactly the unbound plans.
            let reserved = self.e.node_reserved(&self.nodes[n].name).unwrap_or_default();
            let mut expected = [0i64; 3];
            for (uid, w) in &self.wls {
                let holds = matches!(
                    self.e.workload_state(uid),
                    Some(WorkloadState::Admitted | WorkloadState::Evicting | WorkloadState::Preempting)
                );
                if holds && w.bound.is_empty() {
                    for (m, r) in self.plan(uid) {
                        if m == n {
                            (0..3).for_each(|i| expected[i] += r[i]);
                        }
                    }
                }
            }
            prop_assert_eq!(&res_of(&reserved, 0)[..2], &expected[..2], "n{} reserved", n);
            prop_assert_eq!(
                reserved.get(PODS).copied().unwrap_or(0),
                expected[2],
                "n{} reserved pods",
                n
            );
        }
        Ok(())
    }

    pub fn check_placements(&self) -> Result<(), TestCaseError> {
        for (uid, w) in &self.wls {
            let state = self.e.workload_state(uid);
            if !matches!(
                state,
                Some(WorkloadState::Admitted | WorkloadState::Evicting | WorkloadState::Preempting)
            ) {
                continue;
            }
            let plan = self.plan(uid);
            let mut total = [0i64; 3];
            for &(count, gpu, cpu) in &w.spec.pod_sets {
                total[0] += count as i64 * gpu * 1000;
                total[1] += count as i64 * cpu * 500;
                total[2] += count as i64 * 1000;
            }
            let mut placed = [0i64; 3];
            for (_, r) in &plan {
                (0..3).for_each(|i| placed[i] += r[i]);
            }
            prop_assert_eq!(placed, total, "{} placement holds all its pods", uid);
            // Flavors and racks from the admission (a preemptor's is not out yet).
            let (flavors, racks): (Vec<String>, Vec<String>) = match &w.admission {
                Some(a) => (
                    a.pod_sets.iter().map(|p| p.flavors[GPU].clone()).collect(),
                    a.pod_sets
                        .iter()
                        .filter_map(|p| p.topology.as_ref().map(|t| t.value.clone()))
                        .collect(),
                ),
                None => (FLAVORS.iter().map(|f| f.to_string()).collect(), Vec::new()),
            };
            for (n, _) in &plan {
                let g = &self.gens[*n];
                prop_assert!(
                    flavors.contains(&FLAVORS[g.flavor].to_string()),
                    "{} on n{} of another flavor",
                    uid,
                    n
                );
                prop_assert!(!g.tainted || w.spec.tolerates, "{} on tainted n{}", uid, n);
                let needs_rack = w.spec.single_domain && w.admission.is_some() && g.flavor == 1;
                prop_assert!(
                    !needs_rack || racks.contains(&format!("r{}", g.rack)),
                    "{} on n{} outside its racks {:?}",
                    uid,
                    n,
                    racks
                );
            }
            if let Some(a) = &w.admission {
                for (p, f) in a.pod_sets.iter().zip(&flavors) {
                    prop_assert_eq!(
                        p.topology.is_some(),
                        w.spec.single_domain && f == "f1",
                        "{} names a rack iff it needs one",
                        uid
                    );
                }
            }
        }
        Ok(())
    }

    /// Usage recomputed from the admissions against every queue's ceiling
    /// and the cohort's capacity.
    pub fn check_quota(&self) -> Result<(), TestCaseError> {
        let mut used: HashMap<(usize, String), Amount> = HashMap::new();
        for w in self.wls.values() {
            if !matches!(w.phase, Phase::Admitted | Phase::Evicting) {
                continue;
            }
            let a = w.admission.as_ref().expect("admitted");
            for p in a.pod_sets.iter() {
                *used.entry((w.spec.queue, p.flavors[GPU].clone())).or_default() += p.usage[GPU];
            }
        }
        for (fi, f) in FLAVORS.iter().enumerate() {
            let (mut draw, mut capacity) = (0, 0);
            for (qi, g) in self.queues.iter().enumerate() {
                let u = used.get(&(qi, f.to_string())).copied().unwrap_or(0);
                let nominal = g.gpu[fi] * 1000;
                let ceiling = match (g.cohort, g.borrowing) {
                    (false, _) => nominal,
                    (true, Some(b)) => nominal + b * 1000,
                    (true, None) => Amount::MAX,
                };
                prop_assert!(u <= ceiling, "q{} uses {} of {} GPUs, ceiling {}", qi, u, f, ceiling);
                if g.cohort {
                    draw += u;
                    capacity += nominal;
                }
            }
            prop_assert!(draw <= capacity, "cohort uses {} of {} GPUs, has {}", draw, f, capacity);
        }
        Ok(())
    }

    /// Finishes everything, clears foreign pods and cordons, and cycles
    /// until nothing more is admitted.
    pub fn drain(&mut self) -> Result<(), TestCaseError> {
        for n in 0..self.nodes.len() {
            self.foreign[n] = ([0; 3], [0; 3]);
            if !self.nodes[n].schedulable {
                self.step(&Op::Cordon(n as u8, false))?;
            }
        }
        self.sync_usage();
        for _ in 0..200 {
            let holders: Vec<(String, Phase)> = self
                .wls
                .iter()
                .filter(|(_, w)| matches!(w.phase, Phase::Admitted | Phase::Evicting))
                .map(|(u, w)| (u.clone(), w.phase))
                .collect();
            for (uid, phase) in &holders {
                let i = self.uids.iter().position(|u| u == uid).unwrap() as u16;
                self.step(&if *phase == Phase::Evicting {
                    Op::Complete(i)
                } else {
                    Op::Finish(i)
                })?;
            }
            self.step(&Op::Cycle)?;
            let busy = self
                .wls
                .values()
                .any(|w| w.phase != Phase::Pending && w.phase != Phase::Finished);
            let preempting = self
                .uids
                .iter()
                .any(|u| self.e.workload_state(u) == Some(WorkloadState::Preempting));
            if !busy && !preempting && holders.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Whether `count` pods of `per_pod` fit the empty, schedulable nodes
    /// of `flavor` they tolerate (within one rack when `rack`).
    pub fn fits_empty(&self, flavor: &str, per_pod: Res, count: u32, tolerates: bool, rack: bool) -> bool {
        let mut by_rack: BTreeMap<u8, i64> = BTreeMap::new();
        for g in &self.gens {
            if FLAVORS[g.flavor] != flavor || (g.tainted && !tolerates) {
                continue;
            }
            let alloc = [g.gpus * 1000, g.cpus * 1000, g.pods * 1000];
            let k = (0..3)
                .filter(|&r| per_pod[r] > 0)
                .map(|r| alloc[r] / per_pod[r])
                .min()
                .unwrap_or(0);
            *by_rack.entry(if rack { g.rack } else { 0 }).or_default() += k;
        }
        by_rack.values().any(|&k| k >= count as i64)
    }
}
