//! # Sluice's admission engine
//!
//! Pure, deterministic, no I/O: given flavors, ClusterQueues (with cohorts),
//! LocalQueues and workloads, it decides which workloads run now and with
//! which flavors, which workloads are preempted to make room, and why every
//! other workload waits. Time is an input (`now`, in milliseconds). The
//! controller (on a cluster) and `sluice simulate` (in virtual time) drive
//! this same engine.
//!
//! ```text
//!   upsert_flavor / upsert_cluster_queue / upsert_local_queue    (configuration)
//!   add_workload / finish / evict / eviction_complete / remove    (events)
//!                │  each updates the ledger in O(resources) and
//!                │  marks the queues whose chances changed ("woken")
//!                ▼
//!   schedule(now) ──► Cycle { admitted, preempted, evicted, pending_changed, moved, next_wakeup }
//! ```
//!
//! ## The ledger
//! Every ClusterQueue has a *slot* per (flavor, resource) with its nominal
//! quota, optional borrowing and lending limits, its usage (admitted
//! workloads, including ones still being evicted) and its *claims* (capacity
//! reserved by preemptors waiting for their victims). Queues in a cohort put
//! the lendable part of their quota (`lendingLimit`, or all of nominal) into
//! a cohort *pool* per (flavor, resource); the part they keep back is
//! guaranteed to them. A queue's draw on the pool is its usage beyond its
//! guaranteed part, and the pool keeps the sum of draws (and of the nominal
//! quota its members leave unused, for the ordering below). A request fits a
//! slot when
//! - the queue stays within `nominal + borrowingLimit` (within `nominal`
//!   outside a cohort), and
//! - the pool's draws stay within its capacity.
//!
//! Every event touches only the slots of the workload concerned and their
//! pools: no cycle rebuilds usage.
//!
//! ## A cycle
//! 1. Timers fire: backoffs end, and minimum-runtime protections expire
//!    (which wakes the queue of the workload that waited for them).
//! 2. Preemptors whose victims are all gone are admitted with the flavors
//!    they claimed. Backfill reservations are re-planned: one that moved
//!    later is told to its head (`Cycle::moved`), one whose head no longer
//!    fits has its domain looked at again (also after every domain pass
//!    below that admitted something).
//! 3. For every scheduling domain (a cohort, or a queue outside any cohort)
//!    with something new, the candidates of its queues are merged into one
//!    order: **priority descending, then queue-order time, then arrival**
//!    (the order the engine was given them: creation times have whole
//!    seconds, and one created later in the same second is behind). A
//!    woken queue contributes all its pending workloads; the others only
//!    their fresh ones (new or requeued since the last cycle). Each candidate
//!    in turn:
//!    - is skipped with a reason if its ClusterQueue or LocalQueue is held;
//!    - gets flavors: for each pod set and each resource group it needs, the
//!      queue's flavors are tried **in order**; a flavor must accept the pod
//!      set (its node selector agrees with the flavor's labels; the flavor's
//!      NoSchedule/NoExecute taints are tolerated by the pod set or the
//!      flavor's own tolerations) and have quota for every resource of the
//!      group. **The first flavor that fits without borrowing wins; failing
//!      that, the first that fits by borrowing.** Pod sets of one workload
//!      add up on a shared flavor. All pod sets fit, or the workload is not
//!      admitted (gangs are all-or-nothing);
//!    - if it fits, it is admitted at once and its usage recorded, so the
//!      next candidate sees what is left: one cycle admits **as many
//!      workloads as fit**, across all queues;
//!    - if it does not fit, preemption is tried (below); failing that, the
//!      workload is *parked* with an explanation and is not looked at again
//!      until something wakes its queue;
//!    - **within nominal quota before borrowing** (as Kueue orders a
//!      cycle): a candidate that fits only by borrowing, while another queue
//!      of the cohort leaves nominal quota unused on a resource it would
//!      borrow, is deferred to a second pass over the domain, and the rest
//!      of its queue with it (a queue's own order is never inverted). Every
//!      queue thus gets its guaranteed share before anyone borrows it;
//!      otherwise the borrower would be reclaimed within the same cycle
//!      under `reclaimWithinCohort`, or keep the owner out under `Never`.
//!      The second pass resumes all deferred queues in the global order;
//!    - StrictFIFO: once a queue's candidate fails, the rest of that queue
//!      waits behind it this cycle (`BlockedByHead`); a newcomer wakes a
//!      StrictFIFO queue so its parked head is looked at (and blocks) first.
//!      BestEffortFIFO: later workloads may pass.
//!
//!    Within a cycle, availability only shrinks (a withdrawn admission,
//!    below, gives back only what its preemptor claims; anything left over
//!    is offered in the next cycle, which the cycle asks for at once through
//!    `next_wakeup`). So when a workload of some
//!    *shape* (pod sets, requests, selectors, tolerations) fails in a queue,
//!    later workloads of the same shape in that queue fail too. They are
//!    *parked by shape*: they share one explanation per (queue, shape), and
//!    a woken queue keeps its parked workloads in one list per shape. Once a
//!    shape fails again, the rest of its list is skipped without a look.
//!    A cycle therefore costs about (admissions + queues × shapes), not the
//!    number of pending workloads. Parked workloads are told a new
//!    explanation only when their shape's *reason* changes.
//!
//!    A workload admitted earlier in a cycle can be chosen as a victim later
//!    in the same cycle, e.g. a borrower that an owner's queue reclaims under
//!    `reclaimWithinCohort: Any`. Such an admission is *withdrawn*: nothing
//!    was applied yet, so it is dropped from the cycle's output and its quota
//!    released, instead of being admitted and evicted.
//!
//!    [`Engine::schedule_within`] stops a cycle once it has made a given
//!    number of decisions (admissions, preemptions, evictions): the
//!    domains and candidates it did not get to stay as they were, fresh or
//!    woken, and the cycle asks for the next one at once. The next cycle
//!    starts with the domains after the one this cycle stopped in, so each
//!    domain gets its turn. A controller whose writes are rate-limited uses
//!    it to decide no further ahead than it can write.
//!
//! ## Waking (event-driven requeue)
//! A parked workload can only start to fit when quota is freed. So
//! releasing quota (finish, eviction completed, deletion, a dropped claim)
//! wakes every queue of that cohort, and changing a queue or flavor wakes
//! the queues it affects. Timers wake a queue when a victim's protection
//! ends. Nothing polls.
//!
//! ## Preemption
//! When a workload does not fit and its queue's policy allows preemption,
//! the flavor choices that could hold it are tried in preference order.
//! For each choice:
//! - If it would fit once evictions already under way complete, it waits
//!   (`WaitingForEvictions`).
//! - Otherwise, candidates are the admitted workloads using the chosen
//!   (flavor, resource) pairs and allowed by the policy:
//!   - `withinClusterQueue`: in its own queue, lower priority, or
//!     equal-and-newer priority;
//!   - `reclaimWithinCohort`: in other queues of the cohort, only while those
//!     queues borrow the (flavor, resource) pairs the preemptor is short of,
//!     when the preemptor then fits within its own nominal quota (tried
//!     first, and only when such a victim exists);
//!   - `borrowWithinCohort`: lower priority in other queues (up to a
//!     threshold) so that the preemptor can borrow.
//!
//!   A candidate admitted less than its queue's `minRuntime` ago is
//!   protected and never chosen.
//! - Candidates are ordered: those in queues that are borrowing first, then
//!   lower priority, then most recently admitted, then UID. They are removed
//!   in that order until the preemptor fits. Then each, latest first, is
//!   put back if the preemptor still fits without removing it. The set
//!   returned is minimal in that sense.
//!
//! The preemptor then *claims* its flavors. The claim counts as usage for
//! every other workload, so the capacity the victims free goes to the
//! preemptor and nobody else. The victims are reported; each keeps its
//! quota until the caller reports its pods gone
//! ([`Engine::eviction_complete`]). Then the preemptor is admitted and the
//! victims requeue.
//!
//! ## Explanations
//! Every pending workload has an [`Explanation`]: a coarse reason (missing
//! queue, held, not covered, insufficient quota, exceeds quota, blocked by
//! the head, waiting for preemption) and, per flavor tried, why not, with
//! numbers ("needs 16 nvidia.com/gpu, 6 free of 24 nominal, 4 borrowable").
//! A cycle reports an explanation in [`Cycle::pending_changed`] only when the
//! *reason* changes, not the numbers. So a controller writes status once per
//! reason, not once per cycle. [`Engine::position`] gives a workload's place
//! in its ClusterQueue and LocalQueue on demand.
//!
//! ## Stop policies
//! `Hold` admits nothing new. `HoldAndDrain` also evicts what the queue has
//! admitted; those evictions are reported by the next cycle.
//!
//! ## Start-time estimates
//! [`Engine::forecast`] ([`forecast`]) runs a deep copy of the engine
//! forward in virtual time, with expected run times, to estimate when each
//! pending workload will be admitted; the original is not touched.
//!
//! ## Determinism
//! Decisions depend only on the sequence of calls. Iteration that affects a
//! decision runs over ordered collections; hash maps are used only for
//! lookups.
#![forbid(unsafe_code)]

mod decision;
mod engine;
pub mod forecast;
pub mod idle;
mod ledger;
mod model;
pub mod pace;
pub mod reclaim;
pub mod shape;
pub mod sharing;
pub mod usage;

pub use decision::{
    Admission, Backfilled, BudgetOverrun, BudgetSpent, Cycle, Eviction, EvictionReason, Explanation, FlavorVerdict,
    NeverOnNodes, PendingReason, PodSetAssignment, Preemption, PreemptionReason, ReservationMoved, ReservedNodes,
    ReservedStart, TopologyDomain, Verdict,
};
pub use engine::{
    Engine, EngineError, FairShare, QueuePosition, QueueUsage, ResourceUsage, UsageChange, WorkloadState,
};
pub use forecast::{DEFAULT_EXPECTED_RUNTIME_MS, ForecastSettings};
pub use model::*;
