//! `GET /events`: a server-sent-event stream of transitions and periodic snapshots.
//!
//! Transitions reach the stream through a transition-only observer on the registry
//! ([`Broadcaster`]; it leaves the record path exactly as without observers) and a bounded
//! broadcast channel. The observer runs on the thread that recorded the call and never waits:
//! it builds one small event and hands it to the channel, which keeps the last
//! [`StatusBuilder::event_buffer`](super::StatusBuilder::event_buffer) events. A client that
//! reads slower than transitions come is *lagged*, not waited for: its stream says how many
//! it missed (`lagged`) and sends a fresh snapshot, and the recording thread never knows.
//!
//! Events, each a JSON object on one `data:` line:
//!
//! | `event:` | when | data |
//! |---|---|---|
//! | `snapshot` | at connection, every snapshot interval, and shortly after transitions | the `GET /tools` document for the stream's query |
//! | `transition` | every breaker transition, in order | `{tool, from, to, reason, reason_text, at_ms}` |
//! | `lagged` | the client fell behind | `{missed}`: transitions it will not see |
//!
//! The first event carries `retry: 1000`, so a browser's `EventSource` reconnects within a
//! second of a restarted server.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::stream::{self, Stream};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use crate::breaker::Transition;
use crate::registry::HealthObserver;

use super::history::TransitionRecord;
use super::snapshot::{self, ToolsQuery};
use super::Shared;

/// How soon after a transition the stream sends a snapshot (coalescing a burst into one).
const SNAPSHOT_AFTER_TRANSITION: Duration = Duration::from_millis(100);
/// How long before a reconnecting client tries again.
const RETRY: Duration = Duration::from_secs(1);

/// The transition observer: turns each transition into a [`TransitionRecord`] on the channel.
#[derive(Debug)]
pub(super) struct Broadcaster {
    pub(super) sender: broadcast::Sender<Arc<TransitionRecord>>,
}

impl HealthObserver for Broadcaster {
    fn on_transition(&self, tool: &str, transition: &Transition, at: Duration) {
        // Nobody listening (no status task yet, every client gone): nothing to build.
        if self.sender.receiver_count() == 0 {
            return;
        }
        let record = Arc::new(TransitionRecord {
            tool: Arc::from(tool),
            transition: *transition,
            at,
        });
        // Never blocks: a full channel drops its oldest event for the slowest receiver.
        let _ = self.sender.send(record);
    }
}

/// What one client's stream has left to send.
struct Client {
    shared: Weak<Shared>,
    query: ToolsQuery,
    receiver: broadcast::Receiver<Arc<TransitionRecord>>,
    /// Events ready to go out, oldest first.
    queue: VecDeque<Event>,
    next_snapshot: Instant,
    first: bool,
    /// This stream's place among [`StatusBuilder::max_event_streams`](super::StatusBuilder::max_event_streams),
    /// given back when the client goes.
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Client {
    fn snapshot_event(&self, shared: &Shared) -> Event {
        let data = snapshot::tools_json(
            &shared.registry,
            &shared.history,
            &self.query,
            shared.meta(),
        );
        Event::default().event("snapshot").data(data)
    }

    /// The next event, waiting for it; `None` ends the stream (the router is gone).
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            let shared = self.shared.upgrade()?;
            if self.first {
                self.first = false;
                let e = self.snapshot_event(&shared).retry(RETRY);
                self.next_snapshot = Instant::now() + shared.snapshot_interval;
                return Some(e);
            }
            let interval = shared.snapshot_interval;
            drop(shared);
            tokio::select! {
                biased;
                received = self.receiver.recv() => match received {
                    Ok(record) => {
                        let mut data = String::with_capacity(160);
                        snapshot::write_transition(&mut data, &record, true);
                        self.queue.push_back(Event::default().event("transition").data(data));
                        self.snapshot_soon();
                    }
                    Err(RecvError::Lagged(missed)) => {
                        self.queue.push_back(
                            Event::default().event("lagged").data(format!("{{\"missed\":{missed}}}")),
                        );
                        self.snapshot_soon();
                    }
                    Err(RecvError::Closed) => return None,
                },
                () = tokio::time::sleep_until(self.next_snapshot) => {
                    let shared = self.shared.upgrade()?;
                    let e = self.snapshot_event(&shared);
                    self.next_snapshot = Instant::now() + interval;
                    return Some(e);
                }
            }
        }
    }

    /// Brings the next snapshot forward to shortly after now.
    fn snapshot_soon(&mut self) {
        let soon = Instant::now() + SNAPSHOT_AFTER_TRANSITION;
        if soon < self.next_snapshot {
            self.next_snapshot = soon;
        }
    }
}

/// The stream for one client.
fn stream_for(
    shared: &Arc<Shared>,
    query: ToolsQuery,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let client = Client {
        shared: Arc::downgrade(shared),
        query,
        receiver: shared.sender.subscribe(),
        queue: VecDeque::new(),
        next_snapshot: Instant::now(),
        first: true,
        _permit: permit,
    };
    stream::unfold(client, |mut client| async move {
        let event = client.next().await?;
        Some((Ok(event), client))
    })
}

/// The `GET /events` response.
pub(super) fn response(
    shared: &Arc<Shared>,
    query: ToolsQuery,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> impl IntoResponse {
    let mut response = Sse::new(stream_for(shared, query, permit))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    // Proxies must not buffer the stream.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    response
}
