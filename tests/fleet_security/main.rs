//! Fleet security against real servers: wrong passwords (never shown anywhere), TLS against
//! Debian's redis-server with certificates made at test time, hostile values in every key the
//! protocol uses and on its events channel, fleets isolated by key prefix. See
//! `tests/fleet/support.rs` for how servers are found (under `CI=true` a missing one fails).
#![cfg(feature = "fleet")]

#[path = "../fleet/support.rs"]
mod support;

mod auth;
mod capture;
mod garbage;
mod isolation;
mod tls;
