//! Hearing a MCP 2026-07-28 server's changes. That protocol sends no notification unasked: a
//! client that wants `notifications/tools/list_changed` opens a `subscriptions/listen` stream
//! asking for it, and the server sends them there (a server of the handshake era sends them on
//! its session, to the client handler, `connect.rs`).
//!
//! One stream per connection, opened once the connection is up when the server says it has
//! `tools.listChanged`; what it hears goes where a handshake-era notification goes (the
//! client re-reads the list, the hosts are told). A stream that ends while the connection
//! lives is opened again after [`RELISTEN`] — and since a change may have come meanwhile, the
//! list is then read again as if the server had said so.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use rmcp::RoleClient;
use tokio_util::sync::CancellationToken;

use super::Upstream;

/// How long after a stream ended it is opened again (while the connection lives).
const RELISTEN: Duration = Duration::from_secs(1);

/// What the gateway listens for.
fn filter() -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    filter
}

/// Whether `peer` is a connection of MCP 2026-07-28 (or later) to a server that says its tool
/// list may change: one to listen on.
pub(super) fn wanted(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| {
        !info.protocol_version.has_initialize()
            && info
                .capabilities
                .tools
                .as_ref()
                .is_some_and(|t| t.list_changed == Some(true))
    })
}

impl Upstream {
    /// Listens on `peer` until `done` (the connection ended): see the module docs.
    pub(super) async fn listen(self: Arc<Self>, peer: Peer<RoleClient>, done: CancellationToken) {
        let mut again = false;
        while !done.is_cancelled() && !peer.is_transport_closed() {
            let opened = tokio::select! {
                () = done.cancelled() => return,
                s = peer.listen(filter()) => s,
            };
            match opened {
                Ok(mut subscription) => {
                    if std::mem::take(&mut again) {
                        self.tools_changed();
                    }
                    loop {
                        let next = tokio::select! {
                            () = done.cancelled() => return,
                            n = subscription.next() => n,
                        };
                        match next {
                            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                                self.tools_changed();
                            }
                            Ok(Some(_)) => {}
                            Ok(None) | Err(_) => break,
                        }
                    }
                    tracing::debug!(server = %self.name, "MCP server `{}` ended its subscriptions/listen stream: opened again", self.name);
                }
                Err(e) => {
                    tracing::debug!(server = %self.name, "MCP server `{}` refused subscriptions/listen: {}", self.name, super::said(&e));
                }
            }
            again = true;
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(RELISTEN) => {}
            }
        }
    }

    /// The server said its tool list changed (on its session, or on its listen stream).
    pub(super) fn tools_changed(&self) {
        tracing::info!(server = %self.name, "MCP server `{}` says its tool list changed", self.name);
        if let Some(conn) = self.conn.load_full() {
            // The client re-reads the schemas, and its subscription tells the hosts.
            conn.client.server_list_changed();
        }
    }
}
