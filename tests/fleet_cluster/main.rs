//! Fleet mode on the deployments people run beyond a single server, all started here on
//! 127.0.0.1 from the fleet tests' server binary: a cluster of three primaries with a replica
//! each (`cluster.rs`) — the fleet spread over its slots, a primary killed mid-outage and its
//! replica promoted, a shard that restarts empty, a node the replicas cannot reach — a Sentinel
//! set-up whose primary fails over (`sentinel.rs`), and URLs of the wrong kind (`layout.rs`).
//! Without a server binary each test is reported ignored with the reason (under `CI=true` it
//! fails).

#[path = "../harness/mod.rs"]
mod harness;

#[path = "../fleet/support.rs"]
mod support;

#[path = "../fleet/gate.rs"]
mod gate;

#[allow(dead_code)]
#[path = "../fleet_security/capture.rs"]
mod capture;

mod cluster;
mod failover;
mod layout;
mod sentinel;
mod spread;

fn main() -> std::process::ExitCode {
    harness::run(trials![
        multi spread::a_fleet_on_a_cluster_coordinates_the_tools_of_every_primary,
        multi failover::a_primary_killed_mid_outage_fails_over_and_the_fleet_follows,
        multi failover::a_manual_failover_is_followed_through_the_moved_answer,
        multi failover::a_shard_that_lost_its_data_is_republished_alone,
        multi failover::replicas_cut_off_from_one_node_still_coordinate_the_tools_of_the_others,
        current layout::a_plain_url_at_a_cluster_node_says_which_url_to_use,
        current layout::a_cluster_url_at_a_single_server_says_which_url_to_use,
        multi sentinel::a_sentinel_failover_is_followed_and_one_probe_per_recovery_holds,
    ])
}
