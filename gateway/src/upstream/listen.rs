//! Hearing a MCP 2026-07-28 server's changes. That protocol sends no notification unasked: a
//! client that wants `notifications/tools/list_changed` (and the resource and prompt lists'
//! changes, and the updates of resources it subscribes to) opens a `subscriptions/listen`
//! stream asking for them, and the server sends them there (a server of the handshake era
//! sends them on its session, to the client handler, `connect.rs`, and is subscribed to a
//! resource with `resources/subscribe`, which 2026-07-28 removed).
//!
//! One stream per connection, opened once the connection is up when the server says it has
//! `listChanged` for a list or `resources.subscribe`; it asks for the lists the server says may
//! change and names the resources hosts hold subscriptions to now. What it hears goes where a
//! handshake-era notification goes (the client re-reads the tool list; hosts are told of list
//! changes, and the hosts subscribed to a resource of its updates). When the resources hosts
//! hold change (a first host subscribes, the last one leaves), the stream is opened again
//! naming them ([`Upstream::watch_resource`]). A stream that ends while the connection lives
//! is opened again after [`RELISTEN`] — and since a change may have come meanwhile, the tool
//! list is then read again as if the server had said so, and hosts are told the other lists
//! may have changed.

use std::sync::Arc;
use std::time::Duration;

#[allow(deprecated)] // resources/subscribe: the handshake era's, what its servers still use
use rmcp::model::{
    ClientRequest, ServerCapabilities, ServerNotification, SubscribeRequest,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleClient};
use tokio_util::sync::CancellationToken;

use super::Upstream;
use crate::notify::Lists;

/// How long after a stream ended it is opened again (while the connection lives).
const RELISTEN: Duration = Duration::from_secs(1);

/// What the gateway listens for on a server with `caps`: the lists it says may change, and the
/// resources hosts hold subscriptions to (`uris`) when it offers subscriptions.
fn filter(caps: &ServerCapabilities, uris: Vec<String>) -> SubscriptionFilter {
    let mut filter = SubscriptionFilter::new();
    let yes = |b: Option<bool>| (b == Some(true)).then_some(true);
    filter.tools_list_changed = yes(caps.tools.as_ref().and_then(|t| t.list_changed));
    filter.prompts_list_changed = yes(caps.prompts.as_ref().and_then(|p| p.list_changed));
    filter.resources_list_changed = yes(caps.resources.as_ref().and_then(|r| r.list_changed));
    if caps.resources.as_ref().and_then(|r| r.subscribe) == Some(true) && !uris.is_empty() {
        filter.resource_subscriptions = Some(uris);
    }
    filter
}

/// Whether `filter` asks for anything (a stream that asks for nothing is not opened).
fn asks(filter: &SubscriptionFilter) -> bool {
    filter.tools_list_changed.is_some()
        || filter.prompts_list_changed.is_some()
        || filter.resources_list_changed.is_some()
        || filter.resource_subscriptions.is_some()
}

/// Whether `peer` is a connection of MCP 2026-07-28 (or later).
fn listens(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
}

/// Whether `peer` is a connection of MCP 2026-07-28 (or later) to a server that says a list
/// may change or offers resource subscriptions: one to listen on.
pub(super) fn wanted(peer: &Peer<RoleClient>) -> bool {
    listens(peer)
        && peer.peer_info().is_some_and(|info| {
            let caps = &info.capabilities;
            asks(&filter(caps, Vec::new()))
                || caps.resources.as_ref().and_then(|r| r.subscribe) == Some(true)
        })
}

impl Upstream {
    /// Listens on `peer` until `done` (the connection ended): see the module docs.
    pub(super) async fn listen(self: Arc<Self>, peer: Peer<RoleClient>, done: CancellationToken) {
        let caps = peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default();
        let mut again = false;
        while !done.is_cancelled() && !peer.is_transport_closed() {
            let asked = filter(&caps, self.hosts.subscriptions.of_server(&self.name));
            if !asks(&asked) {
                // Nothing to hear until a host subscribes to one of its resources.
                tokio::select! {
                    () = done.cancelled() => return,
                    () = self.relisten.notified() => continue,
                }
            }
            let opened = tokio::select! {
                () = done.cancelled() => return,
                s = peer.listen(asked) => s,
            };
            match opened {
                Ok(mut subscription) => {
                    if std::mem::take(&mut again) {
                        self.tools_changed();
                        self.hosts
                            .changed_lists(Lists::RESOURCES.with(Lists::PROMPTS));
                    }
                    loop {
                        let next = tokio::select! {
                            () = done.cancelled() => return,
                            // The resources hosts hold changed: opened again, naming them.
                            () = self.relisten.notified() => break,
                            n = subscription.next() => n,
                        };
                        match next {
                            Ok(Some(n)) => self.heard(n),
                            Ok(None) | Err(_) => {
                                tracing::debug!(server = %self.name, "MCP server `{}` ended its subscriptions/listen stream: opened again", self.name);
                                again = true;
                                break;
                            }
                        }
                    }
                    if !again {
                        continue;
                    }
                }
                Err(e) => {
                    tracing::debug!(server = %self.name, "MCP server `{}` refused subscriptions/listen: {}", self.name, super::said(&e));
                    again = true;
                }
            }
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(RELISTEN) => {}
            }
        }
    }

    /// A notification heard on the listen stream, where its handshake-era twin goes.
    fn heard(self: &Arc<Self>, notification: ServerNotification) {
        match notification {
            ServerNotification::ToolListChangedNotification(_) => self.tools_changed(),
            ServerNotification::ResourceListChangedNotification(_) => {
                self.hosts.changed_lists(Lists::RESOURCES);
            }
            ServerNotification::PromptListChangedNotification(_) => {
                self.hosts.changed_lists(Lists::PROMPTS);
            }
            ServerNotification::ResourceUpdatedNotification(n) => {
                self.resource_updated(&n.params.uri);
            }
            _ => {}
        }
    }

    /// Whether the live connection is of MCP 2026-07-28: the resources it is subscribed to are
    /// those its listen stream names.
    pub(super) fn listens_now(&self) -> bool {
        self.conn
            .load_full()
            .filter(|c| c.alive())
            .is_some_and(|c| listens(c.client.peer()))
    }

    /// Subscribes the server to `uri` (`on`) or unsubscribes it, for the first host to
    /// subscribe or after the last one: `resources/subscribe` (`unsubscribe`) on a connection of
    /// the handshake era; on MCP 2026-07-28, which has neither, its listen stream is opened
    /// again naming the resources hosts hold now. `what` names the request for the texts.
    #[allow(deprecated)] // resources/subscribe: the handshake era's, what its servers still use
    pub(crate) async fn watch_resource(
        &self,
        uri: &str,
        on: bool,
        what: &str,
    ) -> Result<(), McpError> {
        if self.listens_now() {
            self.relisten.notify_one();
            return Ok(());
        }
        let request = if on {
            ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(
                uri.to_owned(),
            )))
        } else {
            ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(
                UnsubscribeRequestParams::new(uri.to_owned()),
            ))
        };
        self.request(request, what).await.map(|_| ())
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
