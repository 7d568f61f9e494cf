//! Config reload: on `SIGHUP`, and when the config file changes (`watch.rs`; `--no-watch`
//! leaves `SIGHUP` only).
//!
//! A reload reads the file and checks it exactly as the start does. A config with problems is
//! refused whole — logged at ERROR with the same `file:line` messages the start gives, the
//! running config kept, nothing touched. A valid one is compared with the running config
//! ([`Diff`]) and applied to the set of upstreams (`upstream/set.rs`, `upstream/reload.rs`):
//! servers added are started, servers removed drained and stopped, a new launch restarted, new
//! settings applied live, every other server untouched (the same process, session, supervisor
//! and breakers). Hosts' sessions are never touched; they are told (`list_changed`) when their
//! lists change. One INFO line per reload says what changed; `GET /v1/servers` and `/healthz`
//! show how many reloads were applied and refused, and how the last one went
//! (`Reloads::document`, `reloads.rs`).
//!
//! Reloads run one at a time, in the order they were asked for: a `SIGHUP` during a reload is
//! one more reload after it. A file change whose content is the one last read (a `touch`, a
//! ConfigMap synced again, a `SIGHUP` that already read it) reloads nothing.

mod watch;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::task::JoinHandle;
use tool_health::ToolPolicy;

use crate::config::{self, Config, ConfigError, Diff, Secrets};
use crate::gateway::Gateway;
use crate::reloads::Trigger;
use crate::signals::Hangups;
use watch::FileWatch;

/// Starts the reloader of `gw`, which runs `running` (read from `path`): reloads on each of
/// `hangups`, and on each change of the file when `watch` is on, until the gateway stops.
pub(crate) fn spawn(
    gw: &Arc<Gateway>,
    path: PathBuf,
    running: Config,
    mut hangups: Hangups,
    watch: bool,
) -> JoinHandle<()> {
    let gw = Arc::clone(gw);
    // What the running config was read from (a change back to it is a change too).
    let hash = config::read(&path).ok().map(|t| hash_of(&t));
    tokio::spawn(async move {
        let mut reloader = Reloader {
            gw,
            watch: FileWatch::new(path.clone()),
            path,
            running,
            hash,
        };
        loop {
            let file = async {
                if watch {
                    reloader.watch.changed().await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            let trigger = tokio::select! {
                () = hangups.next() => Trigger::Hangup,
                () = file => Trigger::File,
                () = reloader.gw.shutdown.cancelled() => break,
            };
            reloader.reload(trigger).await;
        }
    })
}

/// The reloader's state: what runs, and what the file held when it was last read.
struct Reloader {
    gw: Arc<Gateway>,
    path: PathBuf,
    watch: FileWatch,
    running: Config,
    hash: Option<u64>,
}

fn hash_of(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Reloader {
    /// One reload (see the module docs).
    async fn reload(&mut self, trigger: Trigger) {
        let file = self.path.display().to_string();
        let checked = config::read(&self.path).and_then(|text| {
            let hash = hash_of(&text);
            let same = self.hash == Some(hash);
            self.hash = Some(hash);
            if same && trigger == Trigger::File {
                return Ok(None);
            }
            config::parse(&file, &text).map(Some)
        });
        match checked {
            Ok(None) => tracing::debug!(
                "the config file changed back to what was read last: nothing to reload"
            ),
            Ok(Some(new)) => self.apply(trigger, new).await,
            Err(e) => self.refuse(trigger, &e),
        }
    }

    fn refuse(&self, trigger: Trigger, e: &ConfigError) {
        tracing::error!(
            "the config was not reloaded ({}): the gateway keeps running with the config it \
             had.\n{}",
            trigger.name(),
            e.to_string().trim_end()
        );
        let problems: Vec<Value> = e
            .problems
            .iter()
            .map(|p| Value::from(self.gw.secrets.scrub(&p.at(&e.file)).into_owned()))
            .collect();
        self.gw
            .reloads
            .record(trigger, false, ("problems", Value::from(problems)));
    }

    async fn apply(&mut self, trigger: Trigger, mut new: Config) {
        // Before anything of the new config can be logged.
        self.gw.secrets.learn(&Secrets::of(&new));
        for w in &new.warnings {
            tracing::warn!("config reload: {w}");
        }
        let file = self.path.display().to_string();
        for p in &new.absent {
            tracing::warn!(
                "config reload: {} (fix: {}); the other servers run",
                p.at(&file),
                p.fix
            );
        }
        let diff = Diff::between(&self.running, &new);
        tracing::info!("config reloaded ({}): {diff}", trigger.name());
        if diff.defaults {
            // Breakers of no server (agents' traces) created from now on take the new defaults.
            let _ = self
                .gw
                .registry
                .try_set_default_policy(ToolPolicy::from(new.health.defaults.breaker.clone()));
        }
        let late = self.gw.servers.apply(&diff).await;
        if !late.is_empty() {
            tracing::warn!(
                "config reload: {} not stopped yet; {} stopping in the background",
                late.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if late.len() == 1 {
                    "it goes on"
                } else {
                    "they go on"
                }
            );
        }
        // What needs a restart of the gateway keeps its running value (and is said again at
        // the next reload while the file differs).
        new.health.max_message_bytes = self.running.health.max_message_bytes;
        new.health.fleet = self.running.health.fleet.clone();
        self.running = new;
        self.gw
            .reloads
            .record(trigger, true, ("changes", Value::from(diff.to_string())));
    }
}
