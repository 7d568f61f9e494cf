//! Fleet security against real servers: wrong passwords (never shown anywhere), TLS against
//! Debian's redis-server with certificates made at test time, hostile values in every key the
//! protocol uses and on its events channel, fleets isolated by key prefix. See
//! `tests/fleet/support.rs` for how servers are found (under `CI=true` a missing one fails).

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

mod auth;
mod capture;
mod garbage;
mod isolation;
mod tls;

fn main() -> std::process::ExitCode {
    harness::run(trials![
        current auth::a_wrong_password_in_the_url_is_an_auth_error_and_never_shown,
        current auth::a_wrong_password_from_the_builder_is_an_auth_error_and_never_shown,
        current auth::a_wrong_password_from_the_environment_is_an_auth_error_and_never_shown,
        current garbage::garbage_in_the_tool_state_hash_of_the_wrong_type_or_number_changes_no_breaker,
        current garbage::garbage_in_the_tool_state_hash_of_the_wrong_shape_or_format_changes_no_breaker,
        current garbage::garbage_in_a_closed_tools_operator_control_forces_nothing_and_is_said_once,
        current garbage::garbage_in_an_open_tools_operator_control_closes_nothing_and_is_said_once,
        current garbage::garbage_in_the_open_and_control_sets_changes_no_breaker_and_is_said_once,
        current garbage::garbage_in_the_boot_key_changes_no_breaker_and_is_said_once,
        current garbage::garbage_on_the_events_channel_changes_no_breaker_and_is_said_once,
        current garbage::garbage_in_the_probe_lease_changes_no_breaker_and_still_one_probe,
        current garbage::garbage_in_the_rate_buckets_trips_nothing_and_is_said_once,
        current garbage::a_tool_whose_fleet_window_overflows_leaves_its_batch_mates_tripping,
        current garbage::garbage_in_the_quorum_votes_opens_nothing_and_is_said_once,
        multi isolation::two_fleets_with_different_prefixes_on_one_server_never_affect_each_other,
        multi tls::a_trip_spreads_between_two_replicas_over_tls,
        multi tls::a_client_trusting_another_ca_never_connects_and_says_why,
    ])
}
