//! `ToolHealthClient` against the MCP servers people run: the official Python SDK (PyPI `mcp`
//! 2.3.0, `MCPServer`) and TypeScript SDK (npm `@modelcontextprotocol/sdk` 1.32.2, and 1.20.2
//! for the answers it gave before 1.21) servers of `integrations/servers/`, each over stdio and
//! streamable HTTP on 127.0.0.1 (1.20.2 over stdio), and rmcp's demo server in-process.
//!
//! Every case of `cases.rs` runs against every server, in a process (or task) of its own. The
//! breakers run on a manual clock; real time passes only while real processes work (bounded).
//!
//! Without the SDKs installed (`bash scripts/mcp_sdks.sh`; `.ci/run` does it) their cases are
//! reported ignored with the reason; under `CI=true` they fail instead.

mod cases;
mod fixture;
mod spans;

use std::future::Future;

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use tool_health_integrations::mcp_servers::Sdk;

use fixture::Target;

type Case = fn(Target) -> std::pin::Pin<Box<dyn Future<Output = ()>>>;

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), (|t| Box::pin(cases::$name(t))) as Case)),*]
    };
}

fn main() {
    let args = Arguments::from_args();
    let all = cases![
        a_raising_tool_trips,
        wrong_types_never_reach_the_server,
        wrong_types_with_the_check_off_are_the_callers,
        unknown_tools_create_no_entry,
        a_hanging_tool_trips_itself_not_its_siblings,
        a_killed_server_is_refused_as_a_whole_and_recovers_through_one_ping,
        list_tools_hides_an_open_tool_until_its_cooldown_ends,
        the_span_carries_the_mcp_attributes,
    ];
    // The SDK 1.20 server is there for its answers to the model's mistakes.
    let old = [
        "a_raising_tool_trips",
        "wrong_types_never_reach_the_server",
        "wrong_types_with_the_check_off_are_the_callers",
        "unknown_tools_create_no_entry",
        "the_span_carries_the_mcp_attributes",
    ];
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let mut targets: Vec<(String, Result<Target, String>, bool)> = Vec::new();
    for sdk in [Sdk::Python, Sdk::TypeScript, Sdk::TypeScriptOld] {
        let found = sdk.find();
        let modes: &[bool] = if sdk == Sdk::TypeScriptOld {
            &[false]
        } else {
            &[false, true]
        };
        for &http in modes {
            let name = format!("{}_{}", sdk.name(), if http { "http" } else { "stdio" });
            let target = found.clone().map(|launcher| Target::Sdk { launcher, http });
            targets.push((name, target, sdk == Sdk::TypeScriptOld));
        }
    }
    targets.push(("rmcp_in_process".into(), Ok(Target::Rmcp), false));

    let mut trials = Vec::new();
    for (target_name, target, subset) in &targets {
        for (case_name, case) in all {
            if *subset && !old.contains(&case_name) {
                continue;
            }
            let target = target.clone();
            let case: Case = case;
            trials.push(Trial::ignorable_test(
                format!("{target_name}::{case_name}"),
                move || run(target, case, ci),
            ));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Runs one case on a runtime of its own; a missing SDK is an ignore (a failure under CI).
fn run(target: Result<Target, String>, case: Case, ci: bool) -> Result<Completion, Failed> {
    let target = match target {
        Ok(target) => target,
        Err(reason) if ci => return Err(format!("CI=true and {reason}").into()),
        Err(reason) => return Ok(Completion::ignored_with(reason)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failed::from(e.to_string()))?;
    runtime.block_on(case(target));
    Ok(Completion::Completed)
}
