//! The signals the gateway answers, the same in every mode (stdio, HTTP, both):
//!
//! | signal | what the gateway does |
//! |---|---|
//! | `SIGTERM`, `SIGINT` | stops gracefully: says so in the log, stops every upstream's process group (stdin closed, then `SIGTERM`, then `SIGKILL`), flushes OTLP, exits 0 |
//! | `SIGHUP` | keeps running, and says in the log that reloading the config is not supported yet (restart the gateway to apply a new config): a service manager's `reload` must not kill it |
//!
//! The handlers are installed first thing, before any upstream is started: a signal that came
//! before would otherwise end the process at once, leaving its upstreams behind.

/// The installed handlers.
#[derive(Debug)]
pub(crate) struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the handlers (inside a tokio runtime). One that cannot be installed is logged
    /// and left to its default.
    pub(crate) fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!("{name} cannot be handled ({e}): it keeps its default effect");
                    None
                }
            };
            Self {
                term: install(SignalKind::terminate(), "SIGTERM"),
                int: install(SignalKind::interrupt(), "SIGINT"),
                hup: install(SignalKind::hangup(), "SIGHUP"),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// Waits for a signal that stops the gateway, and gives its name (SIGHUP is logged on the
    /// way, and waited past).
    pub(crate) async fn stopping(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            loop {
                tokio::select! {
                    () = next(&mut self.term) => return "SIGTERM",
                    () = next(&mut self.int) => return "SIGINT",
                    () = next(&mut self.hup) => tracing::warn!(
                        "SIGHUP received: reloading the config is not supported yet; the gateway \
                         keeps running with the config it started with (restart it to apply a \
                         new one)"
                    ),
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
