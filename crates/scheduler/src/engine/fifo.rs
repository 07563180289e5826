use super::*;

impl Engine {
    /// Whether a preemptor of `cq` waiting for its victims is ahead of `key`.
    pub(super) fn preemptor_ahead(&self, cq: CqId, key: &OrderKey) -> bool {
        self.preempting
            .range(..key)
            .any(|k| matches!(&self.wl(k.id).state, State::Preempting(h) if h.cq == cq))
    }
}
