//! Yardsticks, so the other figures read as ratios: one uncontended atomic add, one clock read.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::Criterion;

pub fn baselines(c: &mut Criterion) {
    let mut g = c.benchmark_group("baselines");
    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |b| {
        b.iter(|| black_box(&counter).fetch_add(black_box(1), Ordering::Relaxed))
    });
    g.bench_function("instant_now", |b| b.iter(std::time::Instant::now));
    g.finish();
}
