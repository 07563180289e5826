use std::sync::Arc;

use super::*;

fn change(delta: Amount, since: Option<Millis>) -> UsageChange {
    UsageChange {
        uid: "w".into(),
        cluster_queue: "team-a".into(),
        local_queue: "ns-a/main".into(),
        flavor: "h100".into(),
        resource: "nvidia.com/gpu".into(),
        delta,
        since,
    }
}

fn cq() -> Account {
    Account::ClusterQueue(Arc::from("team-a"))
}

fn gpu_hours(book: &UsageBook, account: &Account) -> f64 {
    hours(book.meters_of(account).map(|(_, _, m)| m.total).sum())
}

#[test]
fn usage_is_held_amount_times_time_for_the_queue_and_its_local_queue() {
    let mut book = UsageBook::new(None);
    book.apply(0, &[change(8000, None)]);
    book.apply(2 * HOUR, &[change(-8000, None)]);
    book.advance(5 * HOUR);
    assert_eq!(gpu_hours(&book, &cq()), 16.0);
    assert_eq!(gpu_hours(&book, &Account::LocalQueue("ns-a/main".into())), 16.0);
    assert_eq!(
        book.used_within(&cq(), None, "nvidia.com/gpu", HOUR, 5 * HOUR),
        8000 * i128::from(HOUR)
    );
}

#[test]
fn a_restored_record_is_not_counted_twice_and_usage_before_the_flush_is_its() {
    let mut book = UsageBook::new(None);
    book.apply(0, &[change(4000, None)]);
    let record = book.record(&cq(), 3 * HOUR);
    // A new controller: the record first, then the admitted workload
    // restored with its admission time (0).
    let mut after = UsageBook::new(None);
    after.restore(&cq(), &record);
    after.restore(&cq(), &record);
    after.apply(5 * HOUR, &[change(4000, Some(0))]);
    after.advance(6 * HOUR);
    book.advance(6 * HOUR);
    assert_eq!(
        gpu_hours(&after, &cq()),
        24.0,
        "3 h recorded + 3 h since the flush, 4 GPUs"
    );
    assert_eq!(gpu_hours(&after, &cq()), gpu_hours(&book, &cq()));
    assert_eq!(
        after.used_within(&cq(), None, "nvidia.com/gpu", 0, 6 * HOUR),
        book.used_within(&cq(), None, "nvidia.com/gpu", 0, 6 * HOUR)
    );
}

#[test]
fn a_workload_admitted_after_the_flush_is_charged_from_its_admission() {
    let mut book = UsageBook::new(None);
    book.restore(
        &cq(),
        &AccountRecord {
            flushed_at: HOUR,
            meters: Vec::new(),
        },
    );
    book.apply(4 * HOUR, &[change(1000, Some(2 * HOUR))]);
    book.advance(4 * HOUR);
    assert_eq!(gpu_hours(&book, &cq()), 2.0);
}

#[test]
fn the_decayed_average_halves_every_half_life() {
    let mut book = UsageBook::new(Some(HOUR));
    book.apply(0, &[change(8000, None)]);
    // Long enough held: the average is what is held.
    book.advance(40 * HOUR);
    let avg = |b: &UsageBook| b.decayed_of("team-a").first().map_or(0, |x| x.2);
    assert_eq!(avg(&book), 8000);
    book.apply(40 * HOUR, &[change(-8000, None)]);
    book.advance(41 * HOUR);
    assert_eq!(avg(&book), 4000);
    book.advance(42 * HOUR);
    assert_eq!(avg(&book), 2000);
    // Backdated usage decays as if applied then.
    let mut late = UsageBook::new(Some(HOUR));
    late.apply(41 * HOUR, &[change(8000, Some(40 * HOUR))]);
    late.apply(41 * HOUR, &[change(-8000, None)]);
    late.advance(42 * HOUR);
    assert_eq!(avg(&late), 2000);
}

#[test]
fn without_a_half_life_there_is_no_history() {
    let mut book = UsageBook::new(None);
    book.apply(0, &[change(8000, None)]);
    book.advance(HOUR);
    assert!(book.decayed_of("team-a").is_empty());
}
