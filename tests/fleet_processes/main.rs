//! Fleet mode across three processes (to be written).
#![cfg(feature = "fleet")]

#[path = "../fleet/support.rs"]
mod support;
