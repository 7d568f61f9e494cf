//! The connection's state: what the task and the handle share, and how the task follows the
//! store going and coming back.

use super::*;

/// What the task and the handle share.
pub(in crate::fleet) struct Shared {
    pub(in crate::fleet) replica: ReplicaId,
    pub(super) started: Instant,
    pub(super) connected: AtomicBool,
    pub(super) auth_failed: AtomicBool,
    /// The store is not of the URL's kind (the last error says which URL to use).
    pub(super) layout_failed: AtomicBool,
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
            if self.layout_failed.load(Ordering::Relaxed) {
                let last = self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                return Err(FleetError::Config(last.unwrap_or_default()));
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
    /// Shard `shard` answered a whole exchange (its poll, and its resync if it needed one): it
    /// is connected once it also hears its events channel (its subscription confirmed on its
    /// subscriber's current connection) — and the replica is connected while every shard is:
    /// a replica that reads as connected misses no trip.
    pub(super) fn answered(&mut self, shard: usize) {
        let label = self.shard_label(shard);
        let s = &mut self.shards[shard];
        if !s.subscribed {
            return;
        }
        if !s.connected {
            // (Its resync was asked for when it went away, and is done by now.)
            s.connected = true;
            // News only after the WARN that said the shard was away (at start too, when it
            // did not answer at first); the first connection is otherwise silent.
            if std::mem::take(&mut s.warned) {
                tracing::info!(
                    target: LOG_TARGET,
                    url = %self.store.shown_url,
                    "fleet: {label} answers again; resynced"
                );
            }
        }
        self.update_connected();
    }

    /// The replica's connection state from its shards': connected while every one is, and
    /// each complete exchange then counts for `sync_lag`.
    pub(super) fn update_connected(&mut self) {
        let all = self.shards.iter().all(|s| s.connected);
        if all {
            self.shared.last_sync_ms.store(
                u64::try_from(self.shared.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1),
                Ordering::Relaxed,
            );
            self.ever_connected = true;
        }
        let was = self.shared.connected.swap(all, Ordering::Relaxed);
        if all && !was {
            self.shared.auth_failed.store(false, Ordering::Relaxed);
            self.shared.layout_failed.store(false, Ordering::Relaxed);
            self.layout_error = None;
            self.warned.remove("auth");
            self.shared.set_error(None);
        } else if !all && was {
            self.shared.changed.notify_waiters();
        }
        self.apply_scope();
    }

    /// Shard `shard`'s subscriber's connection closed: the replica does not hear that shard's
    /// events channel until it is subscribed again (a round does that, then reads the shard).
    pub(super) fn unsubscribed(&mut self, shard: usize, error: String) {
        self.shards[shard].subscribed = false;
        self.disconnected(shard, error, false);
    }

    pub(super) fn disconnected(&mut self, shard: usize, error: String, auth: bool) {
        if self.layout_error.is_some() {
            return; // said once; nothing else is news
        }
        self.shards[shard].resync = true;
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
            return;
        }
        let label = self.shard_label(shard);
        let s = &mut self.shards[shard];
        let was = std::mem::replace(&mut s.connected, false);
        if auth {
            self.shared.auth_failed.store(true, Ordering::Relaxed);
        }
        // A refusal of the credentials is said once, even after the outage was: the first
        // round's timeouts come before the connection's own error, and the log must name it.
        if auth && self.warned.insert("auth") {
            s.warned = true;
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                "fleet: the store refused the credentials (check the user and password); \
                 breaking locally until it accepts them"
            );
        } else if was || !s.warned {
            s.warned = true;
            let tools = if self.store.is_cluster() {
                "the tools it holds break"
            } else {
                "breaking"
            };
            tracing::warn!(
                target: LOG_TARGET,
                url = %self.store.shown_url,
                error = %error,
                "fleet: {label} does not answer; {tools} locally until it does"
            );
        }
        self.shared.set_error(Some(error));
        self.update_connected();
    }

    pub(super) fn store_failed(&mut self, shard: usize, e: &StoreError) {
        match e {
            StoreError::Reply => self.reject(Rejected::Reply, 1),
            StoreError::Layout(message) => self.wrong_layout(message),
            StoreError::Auth => {
                self.disconnected(shard, "the store refused the credentials".into(), true);
            }
            // Commands time out while the connection cannot authenticate: the refusal is
            // the reason, not the timeout.
            StoreError::Timeout if self.shared.auth_failed.load(Ordering::Relaxed) => {
                self.disconnected(shard, "the store refused the credentials".into(), true);
            }
            StoreError::Timeout => {
                self.disconnected(shard, "the store did not answer in time".into(), false);
            }
            StoreError::Unavailable(s) | StoreError::Server(s) | StoreError::Moved(s) => {
                self.disconnected(shard, s.clone(), false);
            }
            // The connection's own error said why when it went: kept as the last error.
            StoreError::NotConnected => {
                let said = self
                    .shared
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_some();
                if self.shards[shard].connected || !said {
                    self.disconnected(shard, "the connection is down".into(), false);
                }
                self.shards[shard].resync = true;
            }
        }
    }

    /// The store is not of the URL's kind: said once (ERROR, and as `wait_connected`'s error
    /// and the status's last error); the replica breaks locally, as with a store that does not
    /// answer, and keeps trying in case the store or its URL changes.
    fn wrong_layout(&mut self, message: &str) {
        for s in &mut self.shards {
            s.connected = false;
        }
        self.shared.connected.store(false, Ordering::Relaxed);
        self.shared.layout_failed.store(true, Ordering::Relaxed);
        if self.layout_error.as_deref() != Some(message) {
            tracing::error!(
                target: LOG_TARGET,
                "fleet: {message}; breaking locally"
            );
            self.layout_error = Some(message.to_owned());
        }
        self.shared.set_error(Some(message.to_owned()));
        self.apply_scope();
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
