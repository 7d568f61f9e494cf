//! Says which test suites this run left out, and how to run them: a plain `cargo test` builds
//! this crate with the features its dev-dependency on itself turns on (`otlp-http`, `tokio`; see
//! `Cargo.toml`, `[workspace]`), and cargo silently skips a test target whose
//! `required-features` are off. Each such suite is listed here as an *ignored* test with the
//! command that runs it, so the summary line counts them. With the feature on, its entry is
//! absent: the suite itself runs.

use std::process::ExitCode;

use libtest_mimic::{Arguments, Trial};

/// The command that runs everything (the README's second test command).
const FULL: &str = "cargo test --workspace --all-features";

/// (suite, whether its features are on in this build, what it needs).
const SUITES: &[(&str, bool, &str)] = &[
    ("fleet", cfg!(feature = "fleet"), "feature `fleet`"),
    ("fleet_security", cfg!(feature = "fleet"), "feature `fleet`"),
    (
        "fleet_processes",
        cfg!(feature = "fleet"),
        "feature `fleet`",
    ),
    ("fleet_acl", cfg!(feature = "fleet"), "feature `fleet`"),
    ("fleet_alloc", cfg!(feature = "fleet"), "feature `fleet`"),
    ("mcp_server_metrics", cfg!(feature = "mcp"), "feature `mcp`"),
    ("status", cfg!(feature = "status"), "feature `status`"),
    (
        "status_prometheus",
        cfg!(feature = "prometheus"),
        "feature `prometheus`",
    ),
    (
        "span_processor",
        cfg!(feature = "span-processor"),
        "feature `span-processor`",
    ),
    (
        "span_feed",
        cfg!(feature = "span-feed"),
        "feature `span-feed`",
    ),
    ("receiver", cfg!(feature = "receiver"), "feature `receiver`"),
];

fn main() -> ExitCode {
    let trials = SUITES
        .iter()
        .filter(|(_, on, _)| !on)
        .map(|(suite, _, needs)| {
            let why = format!("suite `{suite}` not built: needs {needs} — run `{FULL}`");
            Trial::test(format!("suite::{suite}"), || Ok(()))
                .with_ignored_flag(true)
                .with_kind(why)
        })
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}
