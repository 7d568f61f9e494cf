//! The signals the gateway answers, the same in every mode (stdio, HTTP, both):
//!
//! | signal | what the gateway does |
//! |---|---|
//! | `SIGTERM`, `SIGINT` | stops gracefully: says so in the log, stops every upstream's process group (stdin closed, then `SIGTERM`, then `SIGKILL`), flushes OTLP, exits 0 |
//! | `SIGHUP` | reloads the config file (`reload.rs`): servers added, removed or changed, hosts' sessions kept; a config with problems is refused and the running one kept |
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

    /// `SIGHUP`s, for the reloader: from now on [`stopping`](Self::stopping) waits past them
    /// without a word.
    pub(crate) fn hangups(&mut self) -> Hangups {
        Hangups {
            #[cfg(unix)]
            hup: self.hup.take(),
        }
    }

    /// Waits for a signal that stops the gateway, and gives its name (a SIGHUP before the
    /// reloader took them is logged on the way, and waited past).
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
                        "SIGHUP received before the gateway could reload its config: ignored"
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

/// The `SIGHUP`s the gateway receives (none where there are no signals).
#[derive(Debug)]
pub(crate) struct Hangups {
    #[cfg(unix)]
    hup: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    /// Waits for the next `SIGHUP` (for ever where it cannot come). Several that came since
    /// the last call are one.
    pub(crate) async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(s) = &mut self.hup {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending().await
    }
}
