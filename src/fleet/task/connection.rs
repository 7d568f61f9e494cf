//! The connection's state: what the task and the handle share, and how the task follows the
//! store going and coming back.

use super::*;

/// What the task and the handle share.
pub(in crate::fleet) struct Shared {
    pub(in crate::fleet) replica: ReplicaId,
    pub(super) started: Instant,
    pub(super) connected: AtomicBool,
    pub(super) auth_failed: AtomicBool,
    /// Milliseconds since `started` of the last complete exchange; `u64::MAX`: none yet.
    pub(super) last_sync_ms: AtomicU64,
    pub(super) last_error: Mutex<Option<String>>,
    pub(in crate::fleet) rejected: [AtomicU64; 4],
    /// open, close, hold, control.
    pub(in crate::fleet) applied: [AtomicU64; 4],
    pub(super) changed: Notify,
}

pub(in crate::fleet) const APPLIED_ACTIONS: [&str; 4] = ["open", "close", "hold", "control"];
pub(super) const OPEN: usize = 0;
pub(super) const CLOSE: usize = 1;
pub(super) const HOLD: usize = 2;
pub(super) const CONTROL: usize = 3;

impl Shared {
    pub(in crate::fleet) fn status(&self) -> FleetStatus {
        let last = self.last_sync_ms.load(Ordering::Relaxed);
        FleetStatus {
            connected: self.connected.load(Ordering::Relaxed),
            sync_lag: (last != u64::MAX).then(|| {
                self.started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(last))
            }),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            replica: self.replica.to_string(),
            applied: self.applied.iter().map(|a| a.load(Ordering::Relaxed)).sum(),
            rejected: self
                .rejected
                .iter()
                .map(|a| a.load(Ordering::Relaxed))
                .sum(),
        }
    }

    pub(in crate::fleet) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Seconds since the last complete exchange (`None`: none yet).
    pub(in crate::fleet) fn sync_lag(&self) -> Option<Duration> {
        self.status().sync_lag
    }

    pub(in crate::fleet) async fn wait_connected(
        &self,
        timeout: Duration,
    ) -> Result<(), FleetError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.changed.notified();
            if self.connected.load(Ordering::Relaxed) {
                return Ok(());
            }
            if self.auth_failed.load(Ordering::Relaxed) {
                return Err(FleetError::Auth);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let last = self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                return Err(FleetError::Unavailable(
                    last.unwrap_or_else(|| "no answer yet".to_owned()),
                ));
            }
        }
    }

    pub(super) fn set_error(&self, error: Option<String>) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = error;
        self.changed.notify_waiters();
    }
}

impl Task {
    /// The store answered a command: the exchange counts for `sync_lag`, and the replica is
    /// connected — once it also hears the events channel (its subscription confirmed on the
    /// subscriber's current connection): a replica that reads as connected misses no trip.
    pub(super) fn connected(&mut self) {
        self.shared.last_sync_ms.store(
            u64::try_from(self.shared.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1),
            Ordering::Relaxed,
        );
        if !self.subscribed {
            return;
        }
        let was = self.shared.connected.swap(true, Ordering::Relaxed);
        self.shared.auth_failed.store(false, Ordering::Relaxed);
        self.shared.set_error(None);
        self.ever_connected = true;
        if !was {
            // News only after the WARN that said the store was away (at start too, when it
            // did not answer at first); the first connection is otherwise silent.
            let warned = self.warned.remove("disconnected");
            self.warned.remove("auth");
            if warned {
                tracing::info!(
                    target: LOG_TARGET,
                    url = %self.store.shown_url,
                    "fleet: the store answers again; resynced"
                );
            }
            self.resync = true;
        }
        self.apply_scope();
    }

    /// The subscriber's connection closed: the replica does not hear the events channel until
    /// it is subscribed again (a round does that, then reads the store).
    pub(super) fn unsubscribed(&mut self, error: String) {
        self.subscribed = false;
        self.disconnected(error, false);
    }

    pub(super) fn disconnected(&mut self, error: String, auth: bool) {
        if !auth
            && !self.ever_connected
            && self.shared.started.elapsed() < self.settings.connect_grace
        {
            // The first connection is still being made (fred queues the first commands until
            // it is): not news yet. Past the grace, a store that never answered is.
            tracing::debug!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                error = %error,
                "fleet: the store has not answered yet"
            );
            self.shared.set_error(Some(error));
            self.resync = true;
            return;
        }
        let was = self.shared.connected.swap(false, Ordering::Relaxed);
        if auth {
            self.shared.auth_failed.store(true, Ordering::Relaxed);
        }
        // A refusal of the credentials is said once, even after the outage was: the first
        // round's timeouts come before the connection's own error, and the log must name it.
        if auth && self.warned.insert("auth") {
            self.warned.insert("disconnected");
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                "fleet: the store refused the credentials (check the user and password); \
                 breaking locally until it accepts them"
            );
        } else if was || !self.warned.contains("disconnected") {
            self.warned.insert("disconnected");
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                error = %error,
                "fleet: the store does not answer; breaking locally until it does"
            );
        }
        self.shared.set_error(Some(error));
        self.resync = true;
        self.apply_scope();
    }

    pub(super) fn store_failed(&mut self, e: &StoreError) {
        match e {
            StoreError::Reply => self.reject(Rejected::Reply, 1),
            StoreError::Auth => self.disconnected("the store refused the credentials".into(), true),
            // Commands time out while the connection cannot authenticate: the refusal is
            // the reason, not the timeout.
            StoreError::Timeout if self.shared.auth_failed.load(Ordering::Relaxed) => {
                self.disconnected("the store refused the credentials".into(), true)
            }
            StoreError::Timeout => {
                self.disconnected("the store did not answer in time".into(), false)
            }
            StoreError::Unavailable(s) | StoreError::Server(s) => {
                self.disconnected(s.clone(), false)
            }
        }
    }

    /// Fleet-only rates: the local window trips while the store is away.
    pub(super) fn apply_scope(&self) {
        if self.settings.rate_scope == RateScope::Fleet {
            self.registry
                .coordination()
                .set_local_rate_trips(!self.shared.is_connected());
        }
    }
}
