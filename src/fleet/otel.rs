//! The fleet's own instruments (see [`Fleet::publish_metrics`](super::Fleet::publish_metrics)).
//! Observable: the callbacks read the task's shared state when the SDK collects, through a
//! weak reference, and never block.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use opentelemetry::metrics::Meter;
use opentelemetry::KeyValue;

use super::task::{Shared, APPLIED_ACTIONS};
use super::wire::Rejected;
use super::{ACTION_ATTRIBUTE, APPLIED, CONNECTED, REJECTED, SYNC_LAG, VALUE_ATTRIBUTE};

pub(super) fn publish(shared: &Arc<Shared>, meter: &Meter) {
    let weak = |s: &Arc<Shared>| -> Weak<Shared> { Arc::downgrade(s) };
    let s = weak(shared);
    meter
        .i64_observable_gauge(CONNECTED)
        .with_unit("1")
        .with_description("1 while the fleet's store answers, 0 while it does not")
        .with_callback(move |obs| {
            if let Some(s) = s.upgrade() {
                obs.observe(i64::from(s.is_connected()), &[]);
            }
        })
        .build();
    let s = weak(shared);
    meter
        .f64_observable_gauge(SYNC_LAG)
        .with_unit("s")
        .with_description("Seconds since the fleet's last complete exchange with its store")
        .with_callback(move |obs| {
            if let Some(lag) = s.upgrade().and_then(|s| s.sync_lag()) {
                obs.observe(lag.as_secs_f64(), &[]);
            }
        })
        .build();
    let s = weak(shared);
    meter
        .u64_observable_counter(APPLIED)
        .with_unit("{decision}")
        .with_description("Decisions of other replicas applied here, by action")
        .with_callback(move |obs| {
            if let Some(s) = s.upgrade() {
                for (i, action) in APPLIED_ACTIONS.iter().enumerate() {
                    obs.observe(
                        s.applied[i].load(Ordering::Relaxed),
                        &[KeyValue::new(ACTION_ATTRIBUTE, *action)],
                    );
                }
            }
        })
        .build();
    let s = weak(shared);
    meter
        .u64_observable_counter(REJECTED)
        .with_unit("{value}")
        .with_description("Values from the fleet's store not trusted (ignored), by kind")
        .with_callback(move |obs| {
            if let Some(s) = s.upgrade() {
                for kind in Rejected::ALL {
                    obs.observe(
                        s.rejected[kind as usize].load(Ordering::Relaxed),
                        &[KeyValue::new(VALUE_ATTRIBUTE, kind.as_str())],
                    );
                }
            }
        })
        .build();
}
