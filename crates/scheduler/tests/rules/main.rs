//! The engine's rules, one scenario each, one file per rule. Read a test
//! as a specification: the queues, the workloads, a cycle, what must
//! happen. Table tests of the pure rules (policy eligibility, victim order,
//! flavor compatibility) sit beside them in `src/engine/`.

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod backfill;
mod budget;
mod cohort_tree;
mod cohorts;
mod config;
mod contention;
mod explanations;
mod fair_sharing;
mod fifo;
mod flavors;
mod foreign;
mod gpu_equivalents;
mod lifecycle;
mod metering;
mod never_placeable;
mod partial;
mod placement;
mod placement_preemption;
mod preemption;
mod shrink;
mod spending;
mod stop;
mod victim_order;
