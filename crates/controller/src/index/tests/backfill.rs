//! Backfill through the index, with events in the orders the controller
//! can see them: a gang told its reservation, then Jobs created within
//! the same second (the API server's creation times have whole seconds)
//! whose UIDs sort before or after the gang's, the gang's own status
//! coming back as an event before or after them, positions refreshed in
//! between, and the newcomers judged in the gang's cycle or a later one.
//! Whatever the order: a Job that would delay the reservation waits, and
//! one that ends before it is admitted with its `backfilled: …` message
//! and `status.admission.backfill`.

use super::*;
use sluice_api::labels::EXPECTED_RUNTIME;

/// `cluster-gpu` (8 GPUs) reserving, explanations written at once.
fn reserving_index() -> Index {
    let mut ix = Index::new(IndexConfig {
        explain_after_ms: 0,
        ..IndexConfig::default()
    });
    let mut queue = cq("cluster-gpu", 8);
    queue.spec.backfill = Some(serde_json::from_value(json!({"policy": "Reserve"})).unwrap());
    ix.apply_flavor(flavor("a100"));
    ix.apply_cluster_queue(queue);
    ix.apply_local_queue(lq("team-a", "cluster-gpu"));
    for k in Kind::all() {
        ix.mark_synced(k);
    }
    ix
}

/// Job `name`: one pod of `gpus` GPUs, declaring `runtime` if given.
fn job(name: &str, gpus: u32, runtime: Option<&str>) -> Job {
    let mut j = mk_job(name, "team-a", 1, gpus);
    if let Some(r) = runtime {
        j.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(EXPECTED_RUNTIME.into(), r.into());
    }
    j
}

/// The Job, and the Workload the controller makes of it as the API
/// server stores it, created at second `created_s`: seen by the index.
fn submit(ix: &mut Index, j: &Job, created_s: i64, now: i64) -> Workload {
    submit_at_priority(ix, j, created_s, now, None)
}

/// [`submit`], the Workload of `priority` if given.
fn submit_at_priority(ix: &mut Index, j: &Job, created_s: i64, now: i64, priority: Option<i32>) -> Workload {
    ix.apply_job(j.clone(), now);
    let mut wl = (ix.take_plans().into_iter())
        .flat_map(|p| p.steps)
        .find_map(|s| match s {
            Step::ApplyWorkload(wl) => Some(*wl),
            _ => None,
        })
        .expect("a Workload is made");
    wl.metadata.uid = Some(format!("wl-uid-{}", j.metadata.name.as_deref().unwrap()));
    wl.metadata.generation = Some(1);
    wl.metadata.creation_timestamp = Some(time_of(T0 + created_s * 1000));
    if priority.is_some() {
        wl.spec.priority = priority;
    }
    ix.apply_workload(wl.clone(), now);
    wl
}

/// The Workload as the API server holds it after the index's writes: a
/// watch event.
fn echo(ix: &mut Index, wl: &Workload, now: i64) {
    let mut seen = wl.clone();
    let key = ObjKey::new(NS, wl.metadata.name.clone().unwrap());
    seen.status = ix.workload_status(&key).cloned();
    ix.apply_workload(seen, now);
}

/// One loop turn of the controller: a cycle, its plans written (the
/// lanes' writes acknowledged) and what they wrote seen back for `echoed`.
fn turn(ix: &mut Index, now: i64, echoed: &[&Workload]) -> Vec<Plan> {
    let (plans, _) = ix.cycle(now);
    for p in &plans {
        ix.feedback(p, &Ok(vec![]), now);
    }
    for wl in echoed {
        echo(ix, wl, now);
    }
    plans
}

fn admitted_uids(plans: &[Plan]) -> Vec<String> {
    (plans.iter())
        .filter_map(|p| match &p.purpose {
            Purpose::Admit { uid } => Some(uid.clone()),
            _ => None,
        })
        .collect()
}

/// How the newcomers reach the index relative to the gang.
#[derive(Clone, Copy, Debug)]
struct Order {
    /// Their UIDs sort before the gang's.
    sort_first: bool,
    /// Created in the gang's second (else the next).
    same_second: bool,
    /// Judged in the gang's own cycle (else after it was told).
    same_cycle: bool,
    /// The gang's status write seen back before they arrive.
    echo_first: bool,
    /// Positions refreshed between the gang's cycle and theirs.
    refresh: bool,
}

/// The steps in `order`: `run` (4 GPUs, 60 s) admitted; `gang`
/// (8) reserves; `long` (4, 1 h) must wait, `short` (4, 15 s) is
/// backfilled.
fn play(order: Order) {
    let mut ix = reserving_index();
    let run = submit(&mut ix, &job("run", 4, Some("60s")), 0, T0);
    assert_eq!(admitted_uids(&turn(&mut ix, T0, &[&run])), ["wl-uid-run"]);

    let gang = submit(&mut ix, &job("gang", 8, None), 10, T0 + 10_000);
    let (long_name, short_name) = if order.sort_first {
        ("a-long", "a-short")
    } else {
        ("z-long", "z-short")
    };
    let long = job(long_name, 4, Some("1h"));
    let short = job(short_name, 4, Some("15s"));
    let second = if order.same_second { 10 } else { 11 };
    if !order.same_cycle {
        let plans = turn(&mut ix, T0 + 10_050, &[]);
        assert!(admitted_uids(&plans).is_empty());
        let told = plans
            .iter()
            .find(|p| {
                p.purpose
                    == Purpose::Pending {
                        uid: "wl-uid-gang".into(),
                    }
            })
            .expect("the gang is told");
        assert_eq!(condition(status_step(told), cond::QUOTA_RESERVED).1, "Reserved");
        if order.echo_first {
            echo(&mut ix, &gang, T0 + 10_100);
        }
        if order.refresh {
            let estimates = ix.forecast_job(T0 + 10_150).run();
            ix.refresh_positions(estimates, T0 + 10_150, true);
        }
    }
    submit(&mut ix, &long, second, T0 + 10_200);
    submit(&mut ix, &short, second, T0 + 10_250);
    let plans = turn(&mut ix, T0 + 10_300, &[&gang]);
    let plans = [plans, turn(&mut ix, T0 + 10_400, &[])].concat();

    let short_uid = format!("wl-uid-{short_name}");
    assert_eq!(admitted_uids(&plans), std::slice::from_ref(&short_uid), "{order:?}");
    let admit = plans
        .iter()
        .find(|p| p.purpose == Purpose::Admit { uid: short_uid.clone() })
        .unwrap();
    let s = status_step(admit);
    assert!(
        condition(s, cond::QUOTA_RESERVED)
            .2
            .contains("backfilled: its declared run time ends before the reservation of research/job-gang from ~"),
        "{order:?}: {:?}",
        condition(s, cond::QUOTA_RESERVED)
    );
    let record = s
        .admission
        .as_ref()
        .and_then(|a| a.backfill.as_ref())
        .expect("backfill recorded");
    assert_eq!(record.reserved_for, "research/job-gang");

    let long_uid = format!("wl-uid-{long_name}");
    assert_eq!(
        ix.engine().workload_state(&long_uid),
        Some(WorkloadState::Pending),
        "{order:?}"
    );
    let why = ix.engine().explanation(&long_uid).unwrap();
    assert_eq!(why.reason_code(), "WouldDelayReservation", "{order:?}");
    assert_eq!(
        ix.engine().explanation("wl-uid-gang").unwrap().reason_code(),
        "Reserved"
    );
}

#[test]
fn whatever_the_order_of_events_a_job_that_would_delay_the_reservation_waits_and_a_short_one_is_backfilled() {
    for bits in 0..32u32 {
        let order = Order {
            sort_first: bits & 1 != 0,
            same_second: bits & 2 != 0,
            same_cycle: bits & 4 != 0,
            echo_first: bits & 8 != 0,
            refresh: bits & 16 != 0,
        };
        play(order);
    }
}

#[test]
fn a_reservation_moved_by_work_ahead_of_it_is_told_to_its_head_with_an_event() {
    let mut ix = reserving_index();
    let run = submit(&mut ix, &job("run", 4, Some("60s")), 0, T0);
    turn(&mut ix, T0, &[&run]);
    let gang = submit(&mut ix, &job("gang", 8, None), 10, T0 + 10_000);
    turn(&mut ix, T0 + 10_050, &[&gang]);
    // Of higher priority, it goes ahead of the gang and holds 4 GPUs for
    // an hour: the gang's start moves from ~T0 + 1 min to ~T0 + 1 h.
    submit_at_priority(&mut ix, &job("urgent", 4, Some("1h")), 20, T0 + 20_000, Some(5));
    let plans = turn(&mut ix, T0 + 20_050, &[]);
    assert_eq!(admitted_uids(&plans), ["wl-uid-urgent"]);
    let event = (plans.iter())
        .flat_map(|p| &p.steps)
        .find_map(|s| match s {
            Step::Event(e) if e.reason == "ReservationMoved" => Some(e),
            _ => None,
        })
        .expect("the gang is told with an Event");
    assert_eq!(event.regarding.name.as_deref(), Some("job-gang"));
    assert!(
        event.note.starts_with("its reservation now starts ~")
            && event.note.contains("research/job-urgent went ahead of it"),
        "{}",
        event.note
    );
    // Its message is written again with the new start, though its reason
    // (`Reserved`) is the same.
    let told = (plans.iter())
        .find(|p| {
            p.purpose
                == Purpose::Pending {
                    uid: "wl-uid-gang".into(),
                }
        })
        .expect("the gang's status is written again");
    let (_, reason, message) = condition(status_step(told), cond::QUOTA_RESERVED);
    assert_eq!(reason, "Reserved");
    let start = sluice_convert::text::instant(T0 + 20_050 + 3_600_000);
    assert!(message.contains(&format!("reserved from ~{start}")), "{message}");
}
