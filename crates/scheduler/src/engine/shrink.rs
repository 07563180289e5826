//! Shrinking an admitted workload whose owner scaled it down: once the
//! extra pods are gone, it holds only what its remaining pods use, and the
//! rest is offered to waiting work ([`crate::shape`] decides when).

use crate::decision::PodSetAssignment;
use crate::ledger::FrKey;
use crate::model::Amount;

use super::state::State;
use super::{Engine, EngineError, WlId};

impl Engine {
    /// An admitted workload runs fewer pods of some pod sets than it was
    /// admitted with, and the others are gone: its admission and usage are
    /// reduced to `counts` (pod set name → pods; at least 1 is kept, and a
    /// count above the admitted one changes nothing), and its domain is
    /// woken so that what it gave back is offered at once. Its node
    /// reservations (placement) are kept until it ends. Whether anything
    /// changed.
    pub fn shrink_admitted(&mut self, uid: &str, counts: &[(String, u32)]) -> Result<bool, EngineError> {
        let id = self.id_of(uid)?;
        let State::Admitted(h) = &self.wl(id).state else {
            return Err(EngineError::WrongState {
                uid: uid.to_string(),
                state: self.wl(id).state.name(),
                expected: "admitted",
            });
        };
        let cq = h.cq;
        let before = h.assignment.clone();
        let mut assignment: Vec<PodSetAssignment> = before.to_vec();
        let mut released: Vec<(FrKey, Amount)> = Vec::new();
        for a in &mut assignment {
            let Some(&(_, want)) = counts.iter().find(|(n, _)| *n == a.name) else {
                continue;
            };
            let want = want.max(1);
            if want >= a.count {
                continue;
            }
            for (resource, total) in &mut a.usage {
                let cut = *total / Amount::from(a.count) * Amount::from(a.count - want);
                *total -= cut;
                if let (Some(flavor), true) = (a.flavors.get(resource), cut != 0) {
                    let fr = (
                        self.catalog.flavor_names.intern(flavor),
                        self.catalog.resources.intern(resource),
                    );
                    match released.iter_mut().find(|(k, _)| *k == fr) {
                        Some((_, v)) => *v += cut,
                        None => released.push((fr, cut)),
                    }
                }
            }
            a.count = want;
        }
        if assignment.as_slice() == &*before {
            return Ok(false);
        }
        for &(fr, amount) in &released {
            if let Some(&slot) = self.queues.cqs[cq].quota.slot_of.get(&fr) {
                self.add_usage(cq, slot, -amount, 0);
                self.meter(id, cq, fr, -amount, None);
            }
        }
        let full: Vec<u32> = self.full_counts(id);
        let counts: Vec<u32> = self
            .wl(id)
            .pod_sets
            .iter()
            .zip(&full)
            .map(|(p, &c)| {
                assignment
                    .iter()
                    .find(|a| *a.name == *p.name)
                    .map_or(c, |a| a.count.min(c))
            })
            .collect();
        self.set_counts(id, &counts);
        let mut usage = match &self.wl(id).state {
            State::Admitted(h) => h.usage.clone(),
            _ => unreachable!("checked above"),
        };
        for (fr, amount) in released {
            if let Some((_, v)) = usage.iter_mut().find(|(k, _)| *k == fr) {
                *v -= amount;
            }
        }
        usage.retain(|(_, v)| *v != 0);
        let borrowing = self.is_borrowing(cq, &usage);
        if let State::Admitted(h) = &mut self.wl_mut(id).state {
            h.usage = usage;
            h.assignment = assignment.into();
            h.borrowing = borrowing;
        }
        self.wake_domain(cq);
        Ok(true)
    }

    /// Each pod set's pods as the workload asked for them (before any
    /// partial admission).
    fn full_counts(&self, id: WlId) -> Vec<u32> {
        let wl = self.wl(id);
        match &wl.full {
            Some(full) => full.0.iter().map(|p| p.count).collect(),
            None => wl.pod_sets.iter().map(|p| p.count).collect(),
        }
    }
}
