//! What every bench file shares: one criterion config, so the whole suite runs in minutes.

#![allow(dead_code)] // each bench file uses a part

use std::time::Duration;

use criterion::Criterion;

/// Short warm-up and measurement: ratios measured in one run are what count, and the suite
/// shares two cores with other work.
pub(crate) fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

/// `tool-XXXXXXXXXXX`: 16 bytes, the name length of the memory goal.
pub(crate) fn tool_name(i: usize) -> String {
    format!("tool-{i:011}")
}
