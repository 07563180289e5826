//! Wall time of whole simulations of Kueue's performance shapes (parse,
//! simulate, build the report). Targets on the 2-core machine: baseline
//! ≤ 2 s, large-scale ≤ 10 s. `cargo bench -p sluice-simulate --bench simulate`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_simulate::{report, scenario, sim};

fn run(file: &str) -> report::Report {
    let path = format!("{}/../../examples/simulate/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("shipped scenario");
    let s = scenario::load(&path, &text).expect("shipped scenario loads");
    let opts = sim::SimOptions {
        eviction_delay: s.eviction_delay.unwrap_or(0),
        ..sim::SimOptions::default()
    };
    let result = sim::run(&s, &opts, &mut |_| {}).expect("simulation runs");
    report::build(&s.name, &opts, &result)
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulate");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    g.bench_function("kueue-baseline", |b| b.iter(|| black_box(run("kueue-baseline.yaml"))));
    g.bench_function("kueue-large-scale", |b| {
        b.iter(|| black_box(run("kueue-large-scale.yaml")))
    });
    g.finish();
}

criterion_group!(simulate, benches);
criterion_main!(simulate);
