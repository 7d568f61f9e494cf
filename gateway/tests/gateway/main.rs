//! The gateway binary against real processes, with no SDK needed: upstreams are this test
//! binary serving the rmcp fixture (`support/fixture.rs`), clients are rmcp's and raw stdio and
//! HTTP (for what no SDK client would send). Fleet mode needs a Redis or Valkey server
//! (`TOOL_HEALTH_FLEET_TEST_SERVER`, else `redis-server` or `valkey-server` on the PATH), the
//! browser test Chromium and `tests/web`'s playwright-core: without them those tests are
//! ignored with the reason, and fail under `CI=true`.

// Items of the test modules are public to each other, not to any crate.
#![allow(unreachable_pub)]

#[path = "../support/mod.rs"]
mod support;

mod api;
mod bad_input;
mod breakers;
mod browser;
mod config;
mod feeds;
mod fleet;
mod flood;
mod health_meta;
mod lifecycle;
mod model;
mod operators;
mod passthrough;
mod progress;
mod protocol;
mod receiver;
mod reload;
mod security;
mod servers;
mod supervise;

use support::trial;

fn main() {
    support::main(|| {
        vec![
            trial("breakers::a_failing_tool_trips_leaves_the_list_and_comes_back_through_one_probe", breakers::a_failing_tool_trips_leaves_the_list_and_comes_back),
            trial("breakers::a_hanging_tool_times_out_and_trips_itself_only", breakers::a_hanging_tool_times_out_and_trips_itself_only),
            trial("breakers::bad_arguments_and_unknown_tools_never_count", breakers::bad_arguments_and_unknown_tools_never_count),
            trial("breakers::a_killed_upstream_leaves_the_list_and_comes_back_with_nothing_counted", breakers::a_killed_upstream_leaves_the_list_and_comes_back_with_nothing_counted),
            trial("bad_input::over_stdio_every_bad_line_is_answered_and_nothing_is_lost", bad_input::over_stdio),
            trial("bad_input::over_http_every_bad_request_is_answered_and_nothing_is_lost", bad_input::over_http),
            trial("api::claim_probe_report_and_the_oracle", api::claim_probe_report_and_the_oracle),
            trial("api::controls_need_the_token_and_move_the_tool_list", api::controls_need_the_token),
            trial("api::servers_healthz_page_and_metrics", api::servers_healthz_page_and_metrics),
            trial("config::a_bad_config_exits_2_naming_the_line_and_the_fix", config::a_bad_config_exits_2),
            trial("fleet::replicas_share_a_trip_through_the_store", fleet::replicas_share_a_trip),
            trial("fleet::replicas_share_a_trip_through_a_cluster", fleet::replicas_share_a_trip_on_a_cluster),
            trial("receiver::an_agents_traces_trip_a_breaker_the_api_shows", receiver::an_agents_traces_trip_a_breaker_the_api_shows),
            trial("security::every_route_checks_host_and_origin", security::every_route_checks_host_and_origin),
            trial("browser::another_sites_page_moves_nothing", browser::another_sites_page_moves_nothing),
            trial("security::a_page_cannot_change_state_with_a_simple_request", security::a_page_cannot_change_state_with_a_simple_request),
            trial("security::a_claim_with_an_overlong_name_is_a_400_naming_the_limit", security::a_claim_with_an_overlong_name_is_a_400_naming_the_limit),
            trial("security::the_gate_answers_one_contract_in_the_gateway_and_the_receiver", security::the_gate_answers_one_contract_in_the_gateway_and_the_receiver),
            trial("security::http_mcp_sessions_are_capped", security::http_mcp_sessions_are_capped),
            trial("flood::a_grpc_flood_is_bounded_by_the_in_flight_budget_as_it_arrives", flood::a_grpc_flood_is_bounded_by_the_in_flight_budget_as_it_arrives),
            trial("supervise::a_killed_stdio_upstream_works_again_within_a_second_of_its_handshake", supervise::a_killed_stdio_upstream_works_again_within_a_second_of_its_handshake),
            trial("supervise::an_http_upstream_down_for_5_s_works_again_within_a_second_of_answering", supervise::an_http_upstream_down_for_5_s_works_again_within_a_second_of_answering),
            trial("supervise::an_http_upstream_that_forgot_the_session_is_initialized_again", supervise::an_http_upstream_that_forgot_the_session_is_initialized_again),
            trial("supervise::a_server_that_keeps_dying_is_refused_and_not_restarted_before_its_cooldown", supervise::a_server_that_keeps_dying_is_refused_and_not_restarted_before_its_cooldown),
            trial("supervise::a_hanging_tools_list_costs_its_own_tools_only", supervise::a_hanging_tools_list_costs_its_own_tools_only),
            trial("supervise::a_forced_open_tool_or_server_comes_back_when_its_time_is_over", supervise::a_forced_open_tool_or_server_comes_back_when_its_time_is_over),
            trial("supervise::a_tool_its_server_dropped_is_no_longer_known", supervise::a_tool_its_server_dropped_is_no_longer_known),
            trial("protocol::a_server_that_speaks_only_2026_07_28_is_reached_over_stdio_and_http", protocol::a_server_that_speaks_only_2026_07_28_is_reached_over_stdio_and_http),
            trial("protocol::a_hung_2026_07_28_server_is_refused_and_probed_back_with_server_discover", protocol::a_hung_2026_07_28_server_is_refused_and_probed_back_with_server_discover),
            trial("protocol::a_2026_07_28_servers_changes_come_on_its_listen_stream_and_its_ttl_spares_it_lists", protocol::a_2026_07_28_servers_changes_come_on_its_listen_stream_and_its_ttl_spares_it_lists),
            trial("protocol::tools_list_tells_2026_07_28_hosts_how_long_it_stays_as_it_is", protocol::tools_list_tells_2026_07_28_hosts_how_long_it_stays_as_it_is),
            trial("protocol::a_request_whose_headers_disagree_with_its_body_is_refused", protocol::a_request_whose_headers_disagree_with_its_body_is_refused),
            trial("protocol::every_sdk_server_is_reached_in_its_era_over_stdio_and_http", protocol::every_sdk_server_is_reached_in_its_era_over_stdio_and_http),
            trial("protocol::a_server_that_ends_at_the_discover_probe_is_opened_with_initialize_next", protocol::a_server_that_ends_at_the_discover_probe_is_opened_with_initialize_next),
            trial("protocol::a_2026_07_28_host_that_closes_its_stream_leaves_nothing_in_the_log", protocol::a_2026_07_28_host_that_closes_its_stream_leaves_nothing_in_the_log),
            trial("lifecycle::nothing_of_a_stdio_upstream_outlives_it", lifecycle::nothing_of_a_stdio_upstream_outlives_it),
            trial("lifecycle::sigterm_stops_a_stdio_gateway_gracefully_and_sighup_does_not", lifecycle::sigterm_stops_a_stdio_gateway_gracefully_and_sighup_does_not),
            trial("lifecycle::listen_with_stdin_at_its_end_keeps_serving", lifecycle::listen_with_stdin_at_its_end_keeps_serving),
            #[cfg(target_os = "linux")]
            trial("lifecycle::a_stalled_host_delays_no_other_host", lifecycle::a_stalled_host_delays_no_other_host),
            trial("operators::secrets_never_show_and_a_server_that_exits_says_why", operators::secrets_never_show_and_a_server_that_exits_says_why),
            trial("operators::check_finds_what_this_machine_lacks", operators::check_finds_what_this_machine_lacks),
            trial("operators::a_port_in_use_is_said_once", operators::a_port_in_use_is_said_once),
            trial("operators::an_empty_gateway_serves_and_delete_ends_a_session_with_200", operators::an_empty_gateway_serves_and_delete_ends_a_session_with_200),
            trial("reload::sighup_adds_a_server_and_no_session_is_dropped", reload::sighup_adds_a_server_and_no_session_is_dropped),
            #[cfg(unix)]
            trial("reload::a_file_change_removes_a_server_and_its_processes_are_gone", reload::a_file_change_removes_a_server_and_its_processes_are_gone),
            trial("reload::a_broken_config_is_refused_and_the_running_one_keeps_serving", reload::a_broken_config_is_refused_and_the_running_one_keeps_serving),
            trial("reload::an_unchanged_server_keeps_its_pid_and_its_open_breaker", reload::an_unchanged_server_keeps_its_pid_and_its_open_breaker),
            trial("reload::a_call_under_way_to_a_removed_server_is_answered_and_counts_nowhere", reload::a_call_under_way_to_a_removed_server_is_answered_and_counts_nowhere),
            trial("model::the_model_reads_the_tool_it_called_what_happened_and_when_to_retry", model::the_model_reads_the_tool_it_called_what_happened_and_when_to_retry),
            trial("servers::a_refused_servers_tools_are_refused_on_the_page_and_servers_are_shown", servers::a_refused_servers_tools_are_refused_on_the_page_and_servers_are_shown),
            trial("progress::progress_reaches_the_host_that_made_the_call", progress::progress_reaches_the_host_that_made_the_call),
            trial("passthrough::a_servers_resources_and_prompts_pass_through_and_a_refused_one_is_refused_softly", passthrough::a_servers_resources_and_prompts_pass_through_and_a_refused_one_is_refused_softly),
            trial("passthrough::a_resource_update_reaches_every_subscribed_host", passthrough::a_resource_update_reaches_every_subscribed_host),
            trial("passthrough::a_hosts_cancellation_reaches_the_server", passthrough::a_hosts_cancellation_reaches_the_server),
            trial("passthrough::log_messages_reach_each_host_at_its_level_with_the_server_named", passthrough::log_messages_reach_each_host_at_its_level_with_the_server_named),
            trial("passthrough::a_servers_request_goes_to_the_host_that_made_the_call", passthrough::a_servers_request_goes_to_the_host_that_made_the_call),
            trial("health_meta::listed_tools_carry_their_health_in_meta", health_meta::listed_tools_carry_their_health_in_meta),
            trial("health_meta::a_read_only_call_is_retried_once_on_the_new_connection", health_meta::a_read_only_call_is_retried_once_on_the_new_connection),
            trial("feeds::the_gateways_own_spans_coming_back_are_not_counted_again", feeds::the_gateways_own_spans_coming_back_are_not_counted_again),
            trial("feeds::a_hosts_own_spans_of_calls_it_made_through_the_gateway_count_once", feeds::a_hosts_own_spans_of_calls_it_made_through_the_gateway_count_once),
            trial("feeds::an_agents_span_named_like_a_gateway_tool_feeds_that_tools_breaker", feeds::an_agents_span_named_like_a_gateway_tool_feeds_that_tools_breaker),
        ]
    });
}
