//! One shard's connections: the command client and the subscriber to one server, and a small
//! task that forwards what they report (connections, errors, messages) to the fleet's task,
//! tagged with the shard and the pair's generation — a pair replaced after a failover keeps
//! nothing it reports from being taken for the new one's.

use fred::clients::SubscriberClient;
use fred::error::Error as FredError;
use fred::prelude::*;
use fred::types::config::Server;
use fred::types::Message;
use tokio::sync::{broadcast, mpsc};

use super::super::FleetError;

/// What one shard's connections report.
#[derive(Debug)]
pub(in crate::fleet) enum ConnEvent {
    /// The command client connected (again).
    Connected,
    /// The command client's connection failed or closed.
    Error(FredError),
    /// The subscriber connected (again): its subscription went with the old connection.
    SubConnected,
    /// The subscriber's connection failed or closed.
    SubError(FredError),
    /// A message on a subscribed channel.
    Message(Message),
    /// Messages were dropped before the task read them.
    Lagged,
}

/// A [`ConnEvent`] of shard `shard`'s connections of generation `generation`.
#[derive(Debug)]
pub(in crate::fleet) struct ShardEvent {
    pub(in crate::fleet) shard: usize,
    pub(in crate::fleet) generation: u64,
    pub(in crate::fleet) event: ConnEvent,
}

/// The connections of one shard to one server.
pub(super) struct Conn {
    pub(super) client: Client,
    pub(super) subscriber: SubscriberClient,
    /// The server (a cluster node); `None` for a single server or Sentinel (fred follows it).
    pub(super) node: Option<Server>,
    pub(super) generation: u64,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Conn {
    /// Builds both clients from `builder`, listens to them, and starts connecting (never
    /// waits). Needs a tokio runtime.
    pub(super) fn start(
        builder: &Builder,
        shard: usize,
        generation: u64,
        node: Option<Server>,
        tx: mpsc::Sender<ShardEvent>,
    ) -> Result<Self, FleetError> {
        let client = builder
            .build()
            .map_err(|e| FleetError::Config(format!("fleet client: {:?}", e.kind())))?;
        let subscriber = builder
            .build_subscriber_client()
            .map_err(|e| FleetError::Config(format!("fleet subscriber: {:?}", e.kind())))?;
        // Listening before connecting: the first connection is an event too.
        let rx = Receivers {
            connected: client.reconnect_rx(),
            errors: client.error_rx(),
            sub_connected: subscriber.reconnect_rx(),
            sub_errors: subscriber.error_rx(),
            messages: subscriber.message_rx(),
        };
        let forwarder = tokio::spawn(rx.forward(shard, generation, tx));
        // Detached: the connection tasks live as long as the clients (until `quit`).
        drop(client.connect());
        drop(subscriber.connect());
        Ok(Self {
            client,
            subscriber,
            node,
            generation,
            forwarder,
        })
    }

    /// Closes both connections, each bounded by `timeout`; nothing they report afterwards is
    /// forwarded.
    pub(super) async fn quit(self, timeout: std::time::Duration) {
        self.forwarder.abort();
        let _ = tokio::time::timeout(timeout, self.subscriber.quit()).await;
        let _ = tokio::time::timeout(timeout, self.client.quit()).await;
    }
}

struct Receivers {
    connected: broadcast::Receiver<Server>,
    errors: broadcast::Receiver<(FredError, Option<Server>)>,
    sub_connected: broadcast::Receiver<Server>,
    sub_errors: broadcast::Receiver<(FredError, Option<Server>)>,
    messages: broadcast::Receiver<Message>,
}

/// A broadcast receiver's next value as an event: `None` when it closed (the clients are
/// gone), `Some(None)` when nothing worth saying was lost.
fn event<T>(
    r: Result<T, broadcast::error::RecvError>,
    ok: impl FnOnce(T) -> ConnEvent,
    lagged: Option<ConnEvent>,
) -> Option<Option<ConnEvent>> {
    match r {
        Ok(v) => Some(Some(ok(v))),
        Err(broadcast::error::RecvError::Lagged(_)) => Some(lagged),
        Err(broadcast::error::RecvError::Closed) => None,
    }
}

impl Receivers {
    /// Forwards every event until the clients are gone or the task stops listening. The
    /// channel is bounded: a task that falls behind holds this up, the clients' own buffers
    /// then drop messages, and that is said (`Lagged`) — the task then reads the store again.
    async fn forward(mut self, shard: usize, generation: u64, tx: mpsc::Sender<ShardEvent>) {
        loop {
            let next = tokio::select! {
                r = self.connected.recv() => event(r, |_| ConnEvent::Connected, Some(ConnEvent::Connected)),
                r = self.errors.recv() => event(r, |(e, _)| ConnEvent::Error(e), None),
                r = self.sub_connected.recv() => {
                    event(r, |_| ConnEvent::SubConnected, Some(ConnEvent::SubConnected))
                }
                r = self.sub_errors.recv() => event(r, |(e, _)| ConnEvent::SubError(e), None),
                r = self.messages.recv() => event(r, ConnEvent::Message, Some(ConnEvent::Lagged)),
            };
            let event = match next {
                None => return,
                Some(None) => continue,
                Some(Some(e)) => e,
            };
            let sent = tx
                .send(ShardEvent {
                    shard,
                    generation,
                    event,
                })
                .await;
            if sent.is_err() {
                return;
            }
        }
    }
}
