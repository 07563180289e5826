//! What idle-GPU reclaim does with a workload the window rule
//! ([`crate::idle`]) found idle: its queue's action, held back while no one
//! waits for its quota (when the policy asks for that), once per idle
//! stretch for a warning, within the queue's minimum runtime, and turned
//! into a deactivation past the requeue limit. The controller (samples from
//! Prometheus) and the simulator (samples from a trace's profile) both ask
//! it, so both do the same.

use crate::model::Millis;

/// What a queue's policy does with an idle workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReclaimAction {
    /// Say so (a condition and an Event), change nothing.
    Warn,
    /// Evict it; it waits in its queue again.
    Evict,
    /// Evict it and take it out of its queue until someone activates it.
    Deactivate,
}

/// A queue's policy, as this rule needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReclaimPolicy {
    pub action: ReclaimAction,
    /// Act only while someone waits for the workload's quota.
    pub only_when_contended: bool,
}

/// What is known about the idle workload now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleFacts {
    pub now: Millis,
    /// Someone waits for its quota ([`crate::Engine::waiting_for_quota_of`]).
    pub contended: bool,
    /// It was warned in this idle stretch already (found busy since: not).
    pub warned: bool,
    pub admitted_at: Millis,
    /// Its queue's minimum runtime (protects it from idle eviction as from
    /// preemption).
    pub min_runtime_ms: Millis,
    /// Idle evictions it had before this one, and how many requeue it
    /// (`None`: no limit here; the caller applies its own).
    pub idle_evictions: u32,
    pub requeue_limit: Option<u32>,
}

/// Why nothing is done now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// The policy acts only while someone waits for its quota; no one does.
    NotContended,
    /// Warned already in this idle stretch.
    Warned,
    /// Within its queue's minimum runtime.
    MinRuntime,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    Hold(Hold),
    Warn,
    Evict,
    /// `over_requeue_limit`: the policy said evict, the limit made it this.
    Deactivate {
        over_requeue_limit: bool,
    },
}

/// What to do with an idle workload under `policy`.
pub fn decide(policy: ReclaimPolicy, facts: &IdleFacts) -> Reclaim {
    if policy.only_when_contended && !facts.contended {
        return Reclaim::Hold(Hold::NotContended);
    }
    match policy.action {
        ReclaimAction::Warn if facts.warned => Reclaim::Hold(Hold::Warned),
        ReclaimAction::Warn => Reclaim::Warn,
        _ if facts.now < facts.admitted_at.saturating_add(facts.min_runtime_ms) => Reclaim::Hold(Hold::MinRuntime),
        ReclaimAction::Deactivate => Reclaim::Deactivate {
            over_requeue_limit: false,
        },
        ReclaimAction::Evict if facts.requeue_limit.is_some_and(|limit| facts.idle_evictions >= limit) => {
            Reclaim::Deactivate {
                over_requeue_limit: true,
            }
        }
        ReclaimAction::Evict => Reclaim::Evict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Millis = 60_000;

    fn facts() -> IdleFacts {
        IdleFacts {
            now: 60 * MIN,
            contended: true,
            warned: false,
            admitted_at: 0,
            min_runtime_ms: 0,
            idle_evictions: 0,
            requeue_limit: None,
        }
    }

    fn policy(action: ReclaimAction, only_when_contended: bool) -> ReclaimPolicy {
        ReclaimPolicy {
            action,
            only_when_contended,
        }
    }

    #[test]
    fn the_table() {
        use ReclaimAction::*;
        let cases: [(&str, ReclaimPolicy, IdleFacts, Reclaim); 9] = [
            ("evict", policy(Evict, true), facts(), Reclaim::Evict),
            (
                "nobody waits",
                policy(Evict, true),
                IdleFacts {
                    contended: false,
                    ..facts()
                },
                Reclaim::Hold(Hold::NotContended),
            ),
            (
                "always, even uncontended",
                policy(Evict, false),
                IdleFacts {
                    contended: false,
                    ..facts()
                },
                Reclaim::Evict,
            ),
            ("warn", policy(Warn, true), facts(), Reclaim::Warn),
            (
                "warned already",
                policy(Warn, true),
                IdleFacts {
                    warned: true,
                    ..facts()
                },
                Reclaim::Hold(Hold::Warned),
            ),
            (
                "warning ignores the minimum runtime",
                policy(Warn, true),
                IdleFacts {
                    min_runtime_ms: 120 * MIN,
                    ..facts()
                },
                Reclaim::Warn,
            ),
            (
                "within the minimum runtime",
                policy(Deactivate, true),
                IdleFacts {
                    min_runtime_ms: 61 * MIN,
                    ..facts()
                },
                Reclaim::Hold(Hold::MinRuntime),
            ),
            (
                "deactivate",
                policy(Deactivate, true),
                IdleFacts {
                    min_runtime_ms: 60 * MIN,
                    ..facts()
                },
                Reclaim::Deactivate {
                    over_requeue_limit: false,
                },
            ),
            (
                "past the requeue limit",
                policy(Evict, true),
                IdleFacts {
                    idle_evictions: 3,
                    requeue_limit: Some(3),
                    ..facts()
                },
                Reclaim::Deactivate {
                    over_requeue_limit: true,
                },
            ),
        ];
        for (name, p, f, want) in cases {
            assert_eq!(decide(p, &f), want, "{name}");
        }
        // Below the limit it still requeues.
        let f = IdleFacts {
            idle_evictions: 2,
            requeue_limit: Some(3),
            ..facts()
        };
        assert_eq!(decide(policy(ReclaimAction::Evict, true), &f), Reclaim::Evict);
    }
}
