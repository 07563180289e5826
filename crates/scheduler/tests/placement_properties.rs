//! Placement invariants (`PlacementMode::Nodes`) under random nodes (two
//! flavors, one with rack topology; 1–8 GPUs, few pod slots, some tainted
//! or cordoned), random workloads (1–2 pod sets of 1–4 pods of 1–8 GPUs,
//! some needing one rack, random priorities), queues with random quota
//! and preemption policies, and random interleavings of add, schedule,
//! finish, evict, eviction_complete, foreign pods coming and going (some
//! terminating), Sluice's pods binding where planned, and cordoning.
//!
//! Per node and resource (GPU, CPU, pods), let
//! - `now`   = what the node's pods request (foreign pods, and the bound
//!   pods of Sluice's workloads) + the planned, unbound pods of every
//!   admitted or evicting workload;
//! - `later` = what stays once terminating pods are gone (foreign pods not
//!   terminating, admitted workloads' bound pods) + the planned, unbound
//!   pods of admitted workloads and of preemptors waiting for victims.
//!
//! After every step:
//! 1. Nodes. When foreign pods never over-commit a node (half the cases:
//!    their requests are capped by what is left), `now <= allocatable` and
//!    `later <= allocatable` everywhere. In every case, no step other than
//!    foreign pods arriving increases the excess of `now` or `later` over
//!    allocatable on any node and resource: the engine never over-commits.
//! 2. Placements. Every admitted, evicting or preempting workload has a
//!    placement ([`Engine::workload_placement`]) holding exactly its pods
//!    and requests, on nodes of its flavors whose taints it tolerates, in
//!    the rack its admission names when it requires one; a new admission
//!    uses schedulable nodes only. With 1, the admitted workloads are
//!    placeable all at once.
//! 3. Bookkeeping. What the engine reserves on each node
//!    ([`Engine::node_reserved`]) is exactly the planned, unbound pods of
//!    those workloads.
//! 4. Quota. Usage recomputed from the admissions stays within every
//!    queue's nominal + borrowing limit and its cohort's capacity; nothing
//!    is admitted twice; every victim is admitted and allowed by the
//!    preemptor's policy for its reason; the ledger (and the engine's own placement
//!    bookkeeping) is consistent; after a cycle every pending workload is
//!    told the reason last reported for it.
//!
//! And at the end, once everything finished, foreign pods are gone and no
//! node is cordoned, a workload of one pod set waits only if it can never
//! fit its quota, or if its pods cannot be placed on the empty nodes of
//! the flavor it was given; one told `NeverPlaceable` fits the empty nodes
//! of none of the flavors it names.

#[path = "placement_properties/checks.rs"]
mod checks;
mod common;
#[path = "placement_properties/steps.rs"]
mod steps;
#[path = "placement_properties/world.rs"]
mod world;

use proptest::prelude::*;
use sluice_scheduler::*;

use world::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// See the module documentation for the exact property.
    #[test]
    fn placement_never_over_commits_nodes((nodes, queues, strict, ops) in scenario()) {
        let mut m = Model::new(&nodes, &queues, strict);
        m.check(true)?;
        for op in &ops {
            m.step(op)?;
        }
        m.drain()?;
        for (uid, w) in &m.wls {
            if w.phase != Phase::Pending || w.spec.pod_sets.len() != 1 {
                continue;
            }
            let e = m.e.explanation(uid).cloned();
            let reason = e.as_ref().map(|e| e.reason.clone());
            match reason {
                Some(PendingReason::NeverFits) => {}
                Some(PendingReason::NoPlacement) => {
                    let e = e.unwrap();
                    let (count, gpu, cpu) = w.spec.pod_sets[0];
                    let flavor = &e.flavors[0].flavor;
                    let rack = w.spec.single_domain && flavor == "f1";
                    prop_assert!(
                        !m.fits_empty(flavor, [gpu * 1000, cpu * 500, 1000], count, w.spec.tolerates, rack),
                        "{} waits for placement on empty nodes: {}",
                        uid,
                        sluice_convert::text::explanation(&e)
                    );
                }
                Some(PendingReason::NeverPlaceable) => {
                    // Every flavor said so, and none of them fits empty.
                    let e = e.unwrap();
                    let (count, gpu, cpu) = w.spec.pod_sets[0];
                    for v in &e.flavors {
                        let rack = w.spec.single_domain && v.flavor == "f1";
                        prop_assert!(
                            !m.fits_empty(&v.flavor, [gpu * 1000, cpu * 500, 1000], count, w.spec.tolerates, rack),
                            "{} is told no node could ever hold it, but {} could: {}",
                            uid,
                            v.flavor,
                            sluice_convert::text::explanation(&e)
                        );
                    }
                }
                other => prop_assert!(false, "{} waits in an empty cluster: {:?}", uid, other),
            }
        }
    }
}
