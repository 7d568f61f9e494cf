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
mod fleet;
mod flood;
mod receiver;
mod security;

use support::trial;

fn main() {
    support::main(|| {
        vec![
            trial("breakers::a_failing_tool_trips_leaves_the_list_and_comes_back_through_one_probe", breakers::a_failing_tool_trips_leaves_the_list_and_comes_back),
            trial("breakers::a_hanging_tool_times_out_and_trips_itself_only", breakers::a_hanging_tool_times_out_and_trips_itself_only),
            trial("breakers::bad_arguments_and_unknown_tools_never_count", breakers::bad_arguments_and_unknown_tools_never_count),
            trial("breakers::a_killed_upstream_is_refused_as_a_whole_restarted_and_recovers_through_one_ping", breakers::a_killed_upstream_restarts_and_recovers_through_one_ping),
            trial("bad_input::over_stdio_every_bad_line_is_answered_and_nothing_is_lost", bad_input::over_stdio),
            trial("bad_input::over_http_every_bad_request_is_answered_and_nothing_is_lost", bad_input::over_http),
            trial("api::claim_probe_report_and_the_oracle", api::claim_probe_report_and_the_oracle),
            trial("api::controls_need_the_token_and_move_the_tool_list", api::controls_need_the_token),
            trial("api::servers_healthz_page_and_metrics", api::servers_healthz_page_and_metrics),
            trial("config::a_bad_config_exits_2_naming_the_line_and_the_fix", config::a_bad_config_exits_2),
            trial("fleet::replicas_share_a_trip_through_the_store", fleet::replicas_share_a_trip),
            trial("receiver::an_agents_traces_trip_a_breaker_the_api_shows", receiver::an_agents_traces_trip_a_breaker_the_api_shows),
            trial("security::every_route_checks_host_and_origin", security::every_route_checks_host_and_origin),
            trial("browser::another_sites_page_moves_nothing", browser::another_sites_page_moves_nothing),
            trial("security::a_page_cannot_change_state_with_a_simple_request", security::a_page_cannot_change_state_with_a_simple_request),
            trial("security::a_claim_with_an_overlong_name_is_a_400_naming_the_limit", security::a_claim_with_an_overlong_name_is_a_400_naming_the_limit),
            trial("security::the_gate_answers_one_contract_in_the_gateway_and_the_receiver", security::the_gate_answers_one_contract_in_the_gateway_and_the_receiver),
            trial("security::http_mcp_sessions_are_capped", security::http_mcp_sessions_are_capped),
            trial("flood::a_grpc_flood_is_bounded_by_the_in_flight_budget_as_it_arrives", flood::a_grpc_flood_is_bounded_by_the_in_flight_budget_as_it_arrives),
        ]
    });
}
