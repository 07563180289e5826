//! The protocol against a modelled API server (one Lease, a
//! `resourceVersion` checked on replace, 409 on a conflict): scenarios
//! step by step, and random interleavings of replicas whose calls land
//! and answer at any moment, fail, lose their answers, freeze and restart.
//! After every step: at most one replica leads, at most one replica's
//! [`LeaseFence`] (fed the Leases it saw) allows a write, and no write
//! took a Lease from another holder before that holder's last write had
//! run out.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::run::lease::LeaseFence;
use crate::run::lease::api::{field_manager, lease_of, stored_of};

const D: Millis = 10_000;
const R: Millis = 2_000;
const M: Millis = 1_000;
/// An epoch time far from 0, as a real clock's.
const T0: Millis = 1_800_000_000_000;

fn timing() -> Timing {
    Timing::new(Duration::from_millis(D as u64))
}

/// The API server's Lease, and a check of every write that lands.
#[derive(Default)]
struct Server {
    lease: Option<Stored>,
    rv: u64,
    /// When the current record's write landed.
    landed: Millis,
    /// Takeovers that came before the holder's last write ran out.
    early: Vec<String>,
}

impl Server {
    fn read(&self) -> Read {
        self.lease.clone().map_or(Read::Missing, Read::Found)
    }

    fn write(&mut self, write: &Write, by: &str, now: Millis) -> Written {
        let current = self.lease.as_ref().map(|l| &l.version);
        match write {
            Write::Create(_) if current.is_some() => Written::Conflict,
            Write::Replace { .. } if current.is_none() => Written::Failed, // 404
            Write::Replace { version, .. } if current != Some(version) => Written::Conflict,
            _ => self.store(write.record().clone(), by, now),
        }
    }

    fn store(&mut self, record: Record, by: &str, now: Millis) -> Written {
        if let Some(old) = &self.lease
            && let Some(holder) = old.record.holder()
            && holder != by
        {
            let runs_out = self.landed + Millis::from(old.record.duration_seconds) * 1000;
            if now < runs_out {
                self.early.push(format!(
                    "{by} took {holder}'s Lease at {now}, before it ran out at {runs_out}"
                ));
            }
        }
        self.rv += 1;
        self.landed = now;
        let stored = Stored {
            record,
            version: self.rv.to_string(),
        };
        self.lease = Some(stored.clone());
        Written::Stored(stored)
    }
}

/// Where a replica is in its turn.
#[derive(Clone, Debug)]
enum Phase {
    Sleep(Millis),
    Reading,
    ReadBack(Read),
    Writing(Write),
    WriteBack(Write, Written),
    Dead,
}

/// What happens to the call a step lands or answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Ok,
    /// The call fails before it reaches the server.
    Fail,
    /// A write lands but its answer is lost.
    LoseAnswer,
    /// The process restarts under the same name (a fresh state).
    Restart,
}

struct Replica {
    c: Candidate,
    fence: LeaseFence,
    phase: Phase,
}

impl Replica {
    fn new(identity: &str, now: Millis) -> Self {
        Self {
            c: Candidate::new(identity, timing()),
            fence: LeaseFence::new(identity, Duration::from_millis(M as u64)),
            phase: Phase::Sleep(now),
        }
    }

    fn saw(&self, stored: &Stored) {
        self.fence.observe(Some(&lease_of(
            "sluice-controller",
            &stored.record,
            None,
            Some(&stored.version),
        )));
    }
}

struct Sim {
    now: Millis,
    server: Server,
    replicas: Vec<Replica>,
    /// Every moment two replicas led, or two fences allowed writes.
    twice: Vec<String>,
}

impl Sim {
    fn new(names: &[&str]) -> Self {
        Self {
            now: T0,
            server: Server::default(),
            replicas: names.iter().map(|n| Replica::new(n, T0)).collect(),
            twice: Vec::new(),
        }
    }

    /// Replica `i` takes its next step (a sleeping one only when due).
    fn step(&mut self, i: usize, fate: Fate) {
        let now = self.now;
        if fate == Fate::Restart {
            let name = self.replicas[i].c.identity.as_str().to_string();
            self.replicas[i] = Replica::new(&name, now);
            return;
        }
        let r = &mut self.replicas[i];
        r.phase = match std::mem::replace(&mut r.phase, Phase::Dead) {
            Phase::Dead => Phase::Dead,
            Phase::Sleep(at) if at > now => Phase::Sleep(at),
            Phase::Sleep(_) => Phase::Reading,
            Phase::Reading if fate == Fate::Fail => Phase::ReadBack(Read::Failed),
            Phase::Reading => Phase::ReadBack(self.server.read()),
            Phase::ReadBack(read) => {
                if let Read::Found(s) = &read {
                    r.saw(s);
                }
                match r.c.after_read(read, now).0 {
                    Next::Write(w) => Phase::Writing(w),
                    Next::ReadAt(at) => Phase::Sleep(at),
                }
            }
            Phase::Writing(w) if fate == Fate::Fail => Phase::WriteBack(w, Written::Failed),
            Phase::Writing(w) => {
                let written = self.server.write(&w, r.c.identity.as_str(), now);
                let answer = if fate == Fate::LoseAnswer {
                    Written::Failed
                } else {
                    written
                };
                Phase::WriteBack(w, answer)
            }
            Phase::WriteBack(w, written) => {
                if let Written::Stored(s) = &written {
                    r.saw(s);
                }
                Phase::Sleep(r.c.after_write(&w, written, now))
            }
        };
        self.check();
    }

    /// The live replicas that lead now (a killed one writes nothing).
    fn leaders(&self) -> Vec<&str> {
        self.live()
            .filter(|r| r.c.leads(self.now))
            .map(|r| r.c.identity.as_str())
            .collect()
    }

    fn live(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.iter().filter(|r| !matches!(r.phase, Phase::Dead))
    }

    fn check(&mut self) {
        let leaders = self.leaders();
        let allowed: Vec<&str> = self
            .live()
            .filter(|r| r.fence.allows(self.now))
            .map(|r| r.c.identity.as_str())
            .collect();
        if leaders.len() > 1 || allowed.len() > 1 {
            let at = self.now - T0;
            self.twice
                .push(format!("at {at} ms: leading {leaders:?}, fences allowing {allowed:?}"));
        }
    }

    /// Every live replica runs undisturbed until `until`; each call takes
    /// `latency` to land and as long to answer. `skip(i)`: replica `i`
    /// is frozen (not stepped).
    fn run_until(&mut self, until: Millis, latency: Millis, skip: impl Fn(usize, Millis) -> bool) {
        while self.now < until {
            let ready: Vec<usize> = (0..self.replicas.len())
                .filter(|&i| !skip(i, self.now))
                .filter(|&i| match self.replicas[i].phase {
                    Phase::Sleep(at) => at <= self.now,
                    Phase::Dead => false,
                    _ => true,
                })
                .collect();
            if ready.is_empty() {
                let due = self
                    .replicas
                    .iter()
                    .filter_map(|r| match r.phase {
                        Phase::Sleep(at) => Some(at),
                        _ => None,
                    })
                    .filter(|&at| at > self.now)
                    .min()
                    .unwrap_or(until);
                self.now = due.min(until).max(self.now + 1);
                self.check();
                continue;
            }
            for i in ready {
                self.step(i, Fate::Ok);
            }
            self.now += latency;
            self.check();
        }
    }

    /// The first moment (from now, stepping by 10 ms) `name` leads.
    fn until_leads(&mut self, name: &str, limit: Millis) -> Option<Millis> {
        let start = self.now;
        while self.now < start + limit {
            if self.leaders() == [name] {
                return Some(self.now);
            }
            let next = self.now + 10;
            self.run_until(next, 10, |_, _| false);
        }
        None
    }

    fn kill(&mut self, name: &str) {
        for r in &mut self.replicas {
            if r.c.identity.as_str() == name {
                r.phase = Phase::Dead;
            }
        }
    }

    fn replica(&self, name: &str) -> &Replica {
        self.replicas.iter().find(|r| r.c.identity.as_str() == name).unwrap()
    }
}

#[test]
fn the_periods_follow_the_lease_duration() {
    let t = |s| Timing::new(Duration::from_secs(s));
    assert_eq!(
        t(15),
        Timing {
            duration: 15_000,
            retry: 3_000,
            margin: 1_000
        }
    );
    assert_eq!((t(10).retry, t(10).margin), (2_000, 1_000));
    assert_eq!((t(6).retry, t(6).margin), (1_200, 600));
}

#[test]
fn two_replicas_creating_the_missing_lease_at_the_same_moment_elect_one() {
    let mut sim = Sim::new(&["a", "b"]);
    // Both read (Missing), both create: the second create is a 409.
    for i in [0, 1, 0, 1, 0, 1, 0, 1, 0, 1] {
        sim.step(i, Fate::Ok);
    }
    assert!(
        matches!(sim.replicas[1].phase, Phase::Sleep(at) if at == sim.now),
        "b reads again at once"
    );
    assert_eq!(sim.leaders(), ["a"]);
    sim.run_until(T0 + 60_000, 5, |_, _| false);
    assert_eq!(sim.leaders(), ["a"]);
    assert_eq!(sim.twice, Vec::<String>::new());
}

#[test]
fn two_replicas_claiming_a_free_lease_at_the_same_moment_elect_one() {
    let mut sim = Sim::new(&["a", "b"]);
    sim.server.store(
        Record {
            holder: None,
            acquired: 0,
            renewed: 0,
            duration_seconds: 10,
            transitions: 3,
        },
        "kubectl",
        T0 - 60_000,
    );
    for i in [0, 1, 0, 1, 0, 1, 0, 1, 0, 1] {
        sim.step(i, Fate::Ok);
    }
    assert_eq!(sim.leaders(), ["a"]);
    let held = sim.server.lease.clone().unwrap().record;
    assert_eq!((held.holder.as_deref(), held.transitions), (Some("a"), 4));
    // b saw a's record and waits for it to run out; a renews.
    sim.run_until(T0 + 60_000, 5, |_, _| false);
    assert_eq!(sim.leaders(), ["a"]);
    assert_eq!(sim.twice, Vec::<String>::new());
}

#[test]
fn a_renewal_never_lands_on_a_lease_another_replica_took() {
    let mut sim = Sim::new(&["a", "b"]);
    sim.run_until(T0 + 5_000, 5, |_, _| false);
    assert_eq!(sim.leaders(), ["a"]);
    // a reads its Lease and is frozen before it writes the renewal.
    while !matches!(sim.replicas[0].phase, Phase::Writing(_)) {
        sim.run_until(sim.now + 5, 5, |i, _| i == 1);
    }
    let frozen_at = sim.now;
    sim.run_until(frozen_at + 30_000, 5, |i, _| i == 0);
    assert_eq!(sim.leaders(), ["b"], "b took over while a was frozen");
    // a wakes: its renewal is refused (409), and it follows.
    sim.step(0, Fate::Ok);
    assert!(matches!(sim.replicas[0].phase, Phase::WriteBack(_, Written::Conflict)));
    sim.run_until(sim.now + 30_000, 5, |_, _| false);
    assert_eq!(sim.leaders(), ["b"]);
    assert_eq!(sim.server.lease.as_ref().unwrap().record.holder.as_deref(), Some("b"));
    assert_eq!(sim.twice, Vec::<String>::new());
    assert_eq!(sim.server.early, Vec::<String>::new());
}

#[test]
fn a_frozen_leader_stops_leading_by_its_own_clock_before_anyone_takes_over() {
    let mut sim = Sim::new(&["a", "b"]);
    sim.run_until(T0 + 5_000, 5, |_, _| false);
    let renewed = sim.replica("a").c.lead_ends().unwrap() - (D - M);
    // Frozen after its last renewal: it leads until D - M after it, by
    // its own answer and by its fence; b leads only later.
    sim.run_until(T0 + 40_000, 5, |i, now| i == 0 && now < T0 + 40_000);
    assert!(!sim.replica("a").c.leads(renewed + D - M));
    assert!(sim.replica("a").c.leads(renewed + D - M - 1));
    assert!(!sim.replica("a").fence.allows(renewed + D - M));
    assert_eq!(sim.leaders(), ["b"]);
    let (first, _) = sim.replica("b").c.seen.clone().unwrap();
    assert!(
        first.record.acquired >= renewed + D,
        "b took it at {} (renewed {renewed})",
        first.record.acquired
    );
    assert_eq!(sim.twice, Vec::<String>::new());
}

#[test]
fn when_the_holder_dies_another_replica_leads_within_the_duration_and_a_renewal_period() {
    for latency in [0, 5, 50] {
        let mut sim = Sim::new(&["a", "b"]);
        sim.run_until(T0 + 7_300, latency, |_, _| false);
        assert_eq!(sim.leaders(), ["a"]);
        let killed = sim.now;
        sim.kill("a");
        let took = sim.until_leads("b", 30_000).expect("b leads") - killed;
        assert!(took <= D + R + 4 * latency + 10, "latency {latency}: {took} ms");
        assert!(took >= D - R, "latency {latency}: {took} ms");
        assert_eq!(sim.twice, Vec::<String>::new());
        assert_eq!(sim.server.early, Vec::<String>::new());
    }
}

#[test]
fn a_released_lease_is_taken_within_a_renewal_period() {
    let mut sim = Sim::new(&["a", "b"]);
    sim.run_until(T0 + 5_000, 5, |_, _| false);
    let release = sim.replica("a").c.release(sim.now).expect("a holds it");
    assert_eq!(release.record().holder, None);
    let released = sim.now;
    assert!(matches!(sim.server.write(&release, "a", released), Written::Stored(_)));
    sim.kill("a");
    let took = sim.until_leads("b", 30_000).expect("b leads") - released;
    assert!(took <= R + 20, "{took} ms");
    // A follower has nothing to release.
    let mut follower = Candidate::new("c", timing());
    let _ = follower.after_read(sim.server.read(), sim.now);
    assert_eq!(follower.release(sim.now), None);
}

#[test]
fn a_replica_restarted_under_its_name_takes_its_lease_back_at_once() {
    let mut sim = Sim::new(&["a", "b"]);
    sim.run_until(T0 + 5_000, 5, |_, _| false);
    sim.step(0, Fate::Restart);
    assert_eq!(
        sim.leaders(),
        Vec::<&str>::new(),
        "a fresh process leads only once it has written"
    );
    let took = sim.until_leads("a", 30_000).expect("a leads") - (T0 + 5_000);
    // A read and a write, 5 ms each way, stepped by 10 ms.
    assert!(took <= 60, "{took} ms");
    assert_eq!(sim.twice, Vec::<String>::new());
}

#[test]
fn renewals_failing_end_the_lead_before_the_lease_runs_out() {
    let mut c = Candidate::new("a", timing());
    let (next, _) = c.after_read(Read::Missing, T0);
    let Next::Write(w) = next else { panic!("{next:?}") };
    let stored = Stored {
        record: w.record().clone(),
        version: "1".into(),
    };
    assert_eq!(c.after_write(&w, Written::Stored(stored), T0 + 3), T0 + R);
    // Every read fails from now on: a read is due by the lead's end, and
    // the lead ends D - M after the renewal, whatever else happens.
    let mut at = T0 + R;
    let mut reads = 0;
    while at < T0 + 20_000 {
        let (next, lost) = c.after_read(Read::Failed, at);
        assert_eq!(lost, None);
        let Next::ReadAt(next) = next else { panic!("{next:?}") };
        assert!(next > at, "a failing replica does not spin");
        at = next;
        reads += 1;
    }
    assert!(c.leads(T0 + D - M - 1));
    assert!(!c.leads(T0 + D - M));
    assert!(reads <= 20_000 / R as usize + 2, "{reads} reads");
    // And the read at the lead's end came exactly then.
    let mut c2 = c.clone();
    c2.renewed = Some(T0);
    assert_eq!(c2.after_read(Read::Failed, T0 + 8_500).0, Next::ReadAt(T0 + D - M));
}

#[test]
fn a_deleted_lease_ends_the_lead_and_is_created_again() {
    let mut sim = Sim::new(&["a"]);
    sim.run_until(T0 + 5_000, 5, |_, _| false);
    let mut c = sim.replica("a").c.clone();
    let (next, lost) = c.after_read(Read::Missing, sim.now);
    assert_eq!(lost, Some(Lost::Deleted));
    assert!(!c.leads(sim.now));
    assert!(matches!(next, Next::Write(Write::Create(_))));
}

#[test]
fn records_round_trip_through_the_lease_object() {
    let record = Record {
        holder: Some("sluice-controller-7d9f-abcde".into()),
        acquired: T0 + 1,
        renewed: T0 + 2_345,
        duration_seconds: 15,
        transitions: 7,
    };
    let version = "4711".to_string();
    let lease = lease_of("sluice-controller", &record, None, Some(&version));
    assert_eq!(lease.metadata.name.as_deref(), Some("sluice-controller"));
    assert_eq!(
        stored_of(&lease),
        Stored {
            record: record.clone(),
            version
        }
    );
    let free = Record { holder: None, ..record };
    assert_eq!(stored_of(&lease_of("x", &free, Some(&lease), None)).record, free);
    // A replace keeps the Lease's labels and annotations.
    let mut labelled = lease.clone();
    labelled.metadata.labels = Some([("team".to_string(), "gpu".to_string())].into());
    let replaced = lease_of("x", &free, Some(&labelled), Some(&"9".to_string()));
    assert_eq!(replaced.metadata.labels, labelled.metadata.labels);
    assert_eq!(replaced.metadata.resource_version.as_deref(), Some("9"));
}

#[test]
fn each_replica_writes_under_a_field_manager_of_its_own() {
    assert_eq!(field_manager("pod-a"), "sluice-controller-lease/pod-a");
    assert_ne!(field_manager("pod-a"), field_manager("pod-b"));
    assert_eq!(field_manager(&"x".repeat(300)).len(), 128);
}

/// How far the clock moves before a step: mostly a call's latency,
/// sometimes a renewal period, now and then a long pause.
fn advance() -> impl Strategy<Value = Millis> {
    prop_oneof![
        12 => 0..100i64,
        4 => 100..3_000i64,
        1 => 3_000..12_000i64,
    ]
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        16 => Just(Fate::Ok),
        2 => Just(Fate::Fail),
        2 => Just(Fate::LoseAnswer),
        1 => Just(Fate::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any interleaving of three replicas' reads, writes and answers, at
    /// any delays (a replica not picked for a while is frozen), with
    /// failures, lost answers and restarts: never two leaders, never two
    /// fences open, never a Lease taken before it ran out; and once
    /// undisturbed, exactly one replica leads within D + 3R.
    #[test]
    fn never_two_leaders_in_any_interleaving(
        script in proptest::collection::vec((0usize..3, advance(), fate()), 1..400),
    ) {
        let mut sim = Sim::new(&["a", "b", "c"]);
        for (i, advance, fate) in script {
            sim.now += advance;
            sim.check();
            sim.step(i, fate);
        }
        prop_assert_eq!(&sim.twice, &Vec::<String>::new());
        prop_assert_eq!(&sim.server.early, &Vec::<String>::new());
        let calm = sim.now;
        sim.run_until(calm + D + 3 * R, 10, |_, _| false);
        prop_assert_eq!(sim.leaders().len(), 1, "nobody leads {} ms after the calm began", D + 3 * R);
        sim.run_until(calm + 5 * D, 10, |_, _| false);
        prop_assert_eq!(sim.leaders().len(), 1);
        prop_assert_eq!(&sim.twice, &Vec::<String>::new());
        prop_assert_eq!(&sim.server.early, &Vec::<String>::new());
    }
}
