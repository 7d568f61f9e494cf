//! Fleet security against real servers (to be written).
#![cfg(feature = "fleet")]

#[path = "../fleet/support.rs"]
mod support;
