//! The claim/renew protocol of leader election, as a pure state machine
//! (no I/O, no clock of its own): what a replica does next given the Lease
//! as the API server answered, and whether it leads at a given moment.
//!
//! It is client-go's `leaderelection` protocol: optimistic concurrency on
//! one object. Every write is a create (refused with 409 when the Lease
//! exists) or a replace carrying the `resourceVersion` of the Lease the
//! replica read (refused with 409 when anyone wrote in between), so of
//! two replicas that claim the same free Lease at the same moment exactly
//! one succeeds, and a renewal never lands on a Lease someone else took.
//!
//! Timing, for a Lease of duration `D` (`leaseDurationSeconds`):
//! - the holder renews every `R` = `D`/5 ([`Timing::retry`]), and leads
//!   until `M` (1 s, or `R`/2 if shorter) before its last successful
//!   renewal's `renewTime` + `D`: each renewal's `renewTime` is this
//!   replica's clock just before the write was sent, so this bound is
//!   measured on one clock;
//! - another replica takes the Lease only once it has seen the same
//!   record unchanged for the record's `D`, measured from when *it* first
//!   read that record (not from the `renewTime` written by another
//!   clock), and polls every `R`. The record was written before it was
//!   read, so the holder's lead has ended by then, whatever the clocks of
//!   the two replicas say;
//! - so after the holder dies the Lease moves within `D` + `R` of its last
//!   renewal (a released Lease within `R`).

use std::time::Duration;

/// Epoch milliseconds on this replica's clock.
pub type Millis = i64;

/// A Lease's spec as the protocol reads and writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// `None` (or empty): free, never taken or released.
    pub holder: Option<String>,
    pub acquired: Millis,
    pub renewed: Millis,
    pub duration_seconds: i32,
    pub transitions: i32,
}

impl Record {
    /// The holder, when the record names one.
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// A Lease as the API server stored it: its record and `resourceVersion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub record: Record,
    pub version: String,
}

/// The answer to a read of the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    Missing,
    Found(Stored),
    /// No answer (unreachable, timed out, a server error).
    Failed,
}

/// A write of the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Create the Lease (it was missing).
    Create(Record),
    /// Replace the Lease if it is still at `version`.
    Replace { record: Record, version: String },
}

impl Write {
    /// The record written.
    pub fn record(&self) -> &Record {
        match self {
            Write::Create(r) | Write::Replace { record: r, .. } => r,
        }
    }
}

/// The answer to a [`Write`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    Stored(Stored),
    /// 409: the Lease exists (create) or changed since it was read (replace).
    Conflict,
    /// No answer: the write may or may not have been applied.
    Failed,
}

/// What to do after an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    Write(Write),
    /// Read the Lease again at this time.
    ReadAt(Millis),
}

/// The protocol's periods, derived from the Lease duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// `D`: how long a Lease holds without renewal.
    pub duration: Millis,
    /// `R`: how often the holder renews and the others read.
    pub retry: Millis,
    /// `M`: how long before its Lease runs out the holder stops leading.
    pub margin: Millis,
}

impl Timing {
    pub fn new(duration: Duration) -> Self {
        let duration = Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX).max(1000);
        let retry = duration / 5;
        Self {
            duration,
            retry,
            margin: (retry / 2).min(1000),
        }
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration / 1000).unwrap_or(i32::MAX)
    }
}

/// Why a replica stopped leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The Lease names another replica.
    To(String),
    /// The Lease was deleted.
    Deleted,
}

/// One replica's side of the protocol.
#[derive(Clone, Debug)]
pub struct Candidate {
    identity: String,
    timing: Timing,
    /// The Lease last read or written, and since when (this replica's
    /// clock) its record has been seen unchanged.
    seen: Option<(Stored, Millis)>,
    /// The `renewTime` of this replica's last successful write naming
    /// itself, while no later answer said the Lease is someone else's.
    renewed: Option<Millis>,
}

impl Candidate {
    pub fn new(identity: impl Into<String>, timing: Timing) -> Self {
        Self {
            identity: identity.into(),
            timing,
            seen: None,
            renewed: None,
        }
    }

    /// Whether this replica leads at `now`.
    pub fn leads(&self, now: Millis) -> bool {
        self.lead_ends().is_some_and(|end| now < end)
    }

    /// When this replica's lead ends unless it renews.
    pub fn lead_ends(&self) -> Option<Millis> {
        let t = self.timing;
        self.renewed.map(|r| r.saturating_add(t.duration - t.margin))
    }

    /// The Lease as last seen.
    pub fn seen(&self) -> Option<&Stored> {
        self.seen.as_ref().map(|(s, _)| s)
    }

    /// After a read answered at `now`: write (claim or renew), or when to
    /// read again. A Lease that names someone else, or none at all, ends
    /// this replica's lead (the returned [`Lost`]).
    pub fn after_read(&mut self, read: Read, now: Millis) -> (Next, Option<Lost>) {
        match read {
            Read::Failed => (Next::ReadAt(self.read_again(now + self.timing.retry, now)), None),
            Read::Missing => {
                let lost = self.renewed.take().map(|_| Lost::Deleted);
                self.seen = None;
                (Next::Write(Write::Create(self.claim(None, now))), lost)
            }
            Read::Found(stored) => self.after_found(stored, now),
        }
    }

    fn after_found(&mut self, stored: Stored, now: Millis) -> (Next, Option<Lost>) {
        let first_seen = self.observe(&stored, now);
        let version = stored.version.clone();
        let record = &stored.record;
        match record.holder() {
            Some(h) if h == self.identity => {
                let due = self.renewed.map_or(now, |r| r + self.timing.retry);
                if now < due {
                    return (Next::ReadAt(self.read_again(due, now)), None);
                }
                let record = Record {
                    renewed: now,
                    duration_seconds: self.timing.duration_seconds(),
                    holder: Some(self.identity.clone()),
                    ..record.clone()
                };
                (Next::Write(Write::Replace { record, version }), None)
            }
            Some(h) => {
                let lost = self.renewed.take().map(|_| Lost::To(h.to_string()));
                let expires = first_seen.saturating_add(self.duration_of(record));
                if now < expires {
                    return (
                        Next::ReadAt(self.read_again(expires.min(now + self.timing.retry), now)),
                        lost,
                    );
                }
                let record = self.claim(Some(record), now);
                (Next::Write(Write::Replace { record, version }), lost)
            }
            None => {
                let record = self.claim(Some(record), now);
                (Next::Write(Write::Replace { record, version }), None)
            }
        }
    }

    /// After the answer, at `now`, to `write`: when to read again.
    pub fn after_write(&mut self, write: &Write, written: Written, now: Millis) -> Millis {
        match written {
            Written::Stored(stored) => {
                self.observe(&stored, now);
                let ours = stored.record.holder() == Some(self.identity.as_str());
                self.renewed = ours.then_some(write.record().renewed);
                let at = if ours {
                    write.record().renewed + self.timing.retry
                } else {
                    now + self.timing.retry
                };
                self.read_again(at, now)
            }
            // Someone wrote since the read: read again at once.
            Written::Conflict => self.read_again(now, now),
            Written::Failed => self.read_again(now + self.timing.retry, now),
        }
    }

    /// The write that gives the Lease up at `now` (another replica takes
    /// it at its next read): only while this replica holds it.
    pub fn release(&self, now: Millis) -> Option<Write> {
        let (stored, _) = self.seen.as_ref()?;
        self.renewed?;
        (stored.record.holder() == Some(self.identity.as_str())).then(|| Write::Replace {
            record: Record {
                holder: None,
                renewed: now,
                ..stored.record.clone()
            },
            version: stored.version.clone(),
        })
    }

    /// Records what was seen at `now`; since when its record has been seen.
    fn observe(&mut self, stored: &Stored, now: Millis) -> Millis {
        let since = match &self.seen {
            Some((old, since)) if old.record == stored.record => *since,
            _ => now,
        };
        self.seen = Some((stored.clone(), since));
        since
    }

    /// A record naming this replica, taken at `now` from `old`'s holder.
    fn claim(&self, old: Option<&Record>, now: Millis) -> Record {
        Record {
            holder: Some(self.identity.clone()),
            acquired: now,
            renewed: now,
            duration_seconds: self.timing.duration_seconds(),
            transitions: old.map_or(0, |r| r.transitions.saturating_add(1)),
        }
    }

    /// How long `record` holds without renewal (this replica's own
    /// duration when it says none).
    fn duration_of(&self, record: &Record) -> Millis {
        match record.duration_seconds {
            d if d > 0 => Millis::from(d) * 1000,
            _ => self.timing.duration,
        }
    }

    /// Read again at `at`, or when the lead ends if that is sooner and
    /// still ahead of `now` (so the loop tells the writer in time).
    fn read_again(&self, at: Millis, now: Millis) -> Millis {
        match self.lead_ends() {
            Some(end) if end > now => at.min(end),
            _ => at,
        }
    }
}

#[cfg(test)]
mod tests;
