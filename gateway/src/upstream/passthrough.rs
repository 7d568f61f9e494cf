//! What an upstream passes through besides its tools: any request sent through its client
//! (the server's breaker, the timeout, the span; `tool_health::mcp::ToolHealthClient::request`)
//! on its live connection — resources, prompts, completions, the logging level, subscriptions —
//! and its resource, template and prompt lists, kept like its tool list (a server slow to list
//! costs its own entries only, [`LIST_WAIT`]).
//!
//! None of these is a tool's call: a read or a get counts for the server's breaker, never for a
//! tool's. While the server is not connected, or its breaker refuses, nothing is sent: its
//! entries leave the lists, and a request to it is answered with a JSON-RPC error saying why
//! and when to retry (a refusal's text begins with the library's `REFUSAL_MESSAGE`) — counted
//! nowhere, as a call the gateway never sent.

#![allow(deprecated)] // logging is deprecated by SEP-2577, and still what hosts use

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientRequest, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    PaginatedRequestParams, Prompt, Resource, ResourceTemplate, ServerCapabilities, ServerResult,
    SetLevelRequest, SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams,
};
use rmcp::service::ServiceError;
use rmcp::ErrorData as McpError;
use tokio::sync::watch;
use tool_health::mcp::is_refusal_error;

use super::{said, Upstream, LIST_WAIT};
use crate::relay::Calling;

/// A server listing more pages than this is cut off there.
const MAX_PAGES: usize = 100;

/// One kind of list a server keeps: its last complete listing, whether one is under way, and
/// how many ended.
#[derive(Debug)]
pub(crate) struct Keep<T> {
    last: Mutex<Arc<Vec<T>>>,
    listing: AtomicBool,
    done: watch::Sender<u64>,
}

impl<T> Default for Keep<T> {
    fn default() -> Self {
        Self {
            last: Mutex::new(Arc::new(Vec::new())),
            listing: AtomicBool::new(false),
            done: watch::channel(0).0,
        }
    }
}

/// A server's resource, template and prompt lists, as it last gave them.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    resources: Keep<Resource>,
    templates: Keep<ResourceTemplate>,
    prompts: Keep<Prompt>,
}

/// A list a server may give, page by page.
pub(crate) trait Listable: Clone + Send + Sync + 'static {
    /// The method, for what hosts and the log read.
    const METHOD: &'static str;
    /// The request for the page after `cursor`.
    fn page(cursor: Option<String>) -> ClientRequest;
    /// The items and the next cursor of an answer (`None`: not this list's answer).
    fn items(result: ServerResult) -> Option<(Vec<Self>, Option<String>)>;
    /// Where a server keeps its list.
    fn keep(kept: &Kept) -> &Keep<Self>;
    /// Whether a server with these capabilities has this list.
    fn offered(caps: &ServerCapabilities) -> bool;
}

fn paginated(cursor: Option<String>) -> Option<PaginatedRequestParams> {
    cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)))
}

impl Listable for Resource {
    const METHOD: &'static str = "resources/list";
    fn page(cursor: Option<String>) -> ClientRequest {
        ClientRequest::ListResourcesRequest(match paginated(cursor) {
            Some(p) => ListResourcesRequest::with_param(p),
            None => ListResourcesRequest::default(),
        })
    }
    fn items(result: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match result {
            ServerResult::ListResourcesResult(r) => Some((r.resources, r.next_cursor)),
            _ => None,
        }
    }
    fn keep(kept: &Kept) -> &Keep<Self> {
        &kept.resources
    }
    fn offered(caps: &ServerCapabilities) -> bool {
        caps.resources.is_some()
    }
}

impl Listable for ResourceTemplate {
    const METHOD: &'static str = "resources/templates/list";
    fn page(cursor: Option<String>) -> ClientRequest {
        ClientRequest::ListResourceTemplatesRequest(match paginated(cursor) {
            Some(p) => ListResourceTemplatesRequest::with_param(p),
            None => ListResourceTemplatesRequest::default(),
        })
    }
    fn items(result: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match result {
            ServerResult::ListResourceTemplatesResult(r) => {
                Some((r.resource_templates, r.next_cursor))
            }
            _ => None,
        }
    }
    fn keep(kept: &Kept) -> &Keep<Self> {
        &kept.templates
    }
    fn offered(caps: &ServerCapabilities) -> bool {
        caps.resources.is_some()
    }
}

impl Listable for Prompt {
    const METHOD: &'static str = "prompts/list";
    fn page(cursor: Option<String>) -> ClientRequest {
        ClientRequest::ListPromptsRequest(match paginated(cursor) {
            Some(p) => ListPromptsRequest::with_param(p),
            None => ListPromptsRequest::default(),
        })
    }
    fn items(result: ServerResult) -> Option<(Vec<Self>, Option<String>)> {
        match result {
            ServerResult::ListPromptsResult(r) => Some((r.prompts, r.next_cursor)),
            _ => None,
        }
    }
    fn keep(kept: &Kept) -> &Keep<Self> {
        &kept.prompts
    }
    fn offered(caps: &ServerCapabilities) -> bool {
        caps.prompts.is_some()
    }
}

impl Upstream {
    /// The capabilities the server gave at its last handshake (kept while it restarts).
    pub(crate) fn capabilities(&self) -> Option<ServerCapabilities> {
        self.caps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `request` (what it is for the texts: `what`, e.g. "`resources/read` of `…`")
    /// through the client on the live connection (waiting for one under way, as a call does).
    /// The server's answer as it is — its JSON-RPC error too; everything else is an error
    /// saying why nothing (or no answer) came, never counted against anything by the gateway.
    pub(crate) async fn request(
        &self,
        request: ClientRequest,
        what: &str,
    ) -> Result<ServerResult, McpError> {
        self.request_from(request, what, None).await
    }

    /// [`request`](Self::request) for the host request `calling` (a request of the server
    /// while it answers goes to that host, `relay.rs`).
    pub(crate) async fn request_from(
        &self,
        request: ClientRequest,
        what: &str,
        calling: Option<&Calling<'_>>,
    ) -> Result<ServerResult, McpError> {
        let Some(conn) = self.live().await else {
            if self.removed.is_cancelled() {
                return Err(McpError::internal_error(
                    format!(
                        "{what} was not sent: MCP server `{}` was removed from the gateway's config",
                        self.name
                    ),
                    None,
                ));
            }
            if let Some(client) = self.refusing_client() {
                if let Err(ServiceError::McpError(e)) = client.request(request).await {
                    if is_refusal_error(&e) {
                        return Err(e);
                    }
                }
            }
            return Err(McpError::internal_error(
                format!(
                    "{what} was not sent: its MCP server `{}` is not connected (the gateway is \
                     connecting to it); retry in a few seconds",
                    self.name
                ),
                None,
            ));
        };
        // Counted until it ends: a reload's restart or removal waits for it.
        let _busy = self.busy.enter();
        let answer = tokio::select! {
            biased;
            () = conn.cut.cancelled() => {
                return Err(McpError::internal_error(self.cut_short_request(what), None))
            }
            r = async {
                match calling {
                    Some(calling) => conn.client.request_told(request, calling.sent()).await,
                    None => conn.client.request(request).await,
                }
            } => r,
        };
        match answer {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(e)) => Err(e),
            Err(ServiceError::Timeout { timeout }) => Err(McpError::internal_error(
                format!(
                    "{what}: MCP server `{}` did not answer within {:.1} s; retry later",
                    self.name,
                    timeout.as_secs_f64()
                ),
                None,
            )),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                conn.broken.cancel();
                Err(McpError::internal_error(
                    format!(
                        "{what} was not answered: its MCP server `{}` is not connected (its \
                         connection closed; the gateway is reconnecting); retry in a few seconds",
                        self.name
                    ),
                    None,
                ))
            }
            Err(e) => Err(McpError::internal_error(
                format!("{what} failed: {}", said(&e)),
                None,
            )),
        }
    }

    /// What a host reads of a request a reload cut short.
    fn cut_short_request(&self, what: &str) -> String {
        if self.removed.is_cancelled() {
            format!(
                "MCP server `{}` was removed from the gateway's config before {what} was \
                 answered; the gateway stopped waiting for it",
                self.name
            )
        } else {
            format!(
                "MCP server `{}` was restarted with a new launch from the gateway's config \
                 before {what} was answered; the gateway stopped waiting for it: ask again",
                self.name
            )
        }
    }

    /// The server's list of `T` to offer hosts now: a fresh listing when it ends within
    /// [`LIST_WAIT`], else its last list; nothing while it is not connected, does not have the
    /// list, or its breaker refuses.
    pub(crate) async fn listed<T: Listable>(self: &Arc<Self>) -> Arc<Vec<T>> {
        if self.conn.load_full().filter(|c| c.alive()).is_none()
            || !self.capabilities().is_some_and(|c| T::offered(&c))
        {
            return Arc::default();
        }
        let keep = T::keep(&self.kept);
        let mut rx = keep.done.subscribe();
        let seen = *rx.borrow_and_update();
        if !keep.listing.swap(true, Ordering::AcqRel) {
            let me = Arc::clone(self);
            tokio::spawn(async move {
                let listed = me.list_all::<T>().await;
                let keep = T::keep(&me.kept);
                if let Some(items) = listed {
                    *keep.last.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(items);
                }
                keep.listing.store(false, Ordering::Release);
                keep.done.send_modify(|d| *d += 1);
            });
        }
        let _ = tokio::time::timeout(LIST_WAIT, rx.wait_for(|d| *d > seen)).await;
        if self.refused_for().is_some() {
            return Arc::default();
        }
        Arc::clone(&keep.last.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The server's last list of `T`, as it gave it (without asking it).
    pub(crate) fn last_listed<T: Listable>(&self) -> Arc<Vec<T>> {
        Arc::clone(
            &T::keep(&self.kept)
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Every page of the server's list of `T` (`None`: not connected, refused, or no answer;
    /// the last list is kept). A server that answers with an error has no such list.
    async fn list_all<T: Listable>(&self) -> Option<Vec<T>> {
        let mut items = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let what = format!("`{}`", T::METHOD);
            match self.request(T::page(cursor.take()), &what).await {
                Ok(result) => match T::items(result) {
                    Some((page, next)) => {
                        items.extend(page);
                        match next {
                            Some(next) => cursor = Some(next),
                            None => return Some(items),
                        }
                    }
                    None => return Some(Vec::new()),
                },
                Err(e) if is_refusal_error(&e) || self.conn.load_full().is_none() => return None,
                Err(e) => {
                    tracing::warn!(server = %self.name, "MCP server `{}` could not list ({}): {}", self.name, T::METHOD, crate::names::printable(&e.message, 300));
                    // A server that answered (`-32601`, …) has no such list; one that did not
                    // keeps its last.
                    return (e.code.0 != -32603).then(Vec::new);
                }
            }
        }
        Some(items)
    }
}

impl Upstream {
    /// The server says `uri` changed: the hosts subscribed to it are told; when none is left
    /// (they went away without unsubscribing), the server is unsubscribed (once).
    pub(crate) fn resource_updated(self: &Arc<Self>, uri: &str) {
        if self.hosts.resource_updated(&self.name, uri)
            || !self.hosts.subscriptions.take_orphan(&self.name, uri)
        {
            return;
        }
        let me = Arc::clone(self);
        let uri = uri.to_owned();
        tokio::spawn(async move {
            let what = format!("`resources/unsubscribe` of `{uri}`");
            let _ = me.watch_resource(&uri, false, &what).await;
        });
    }

    /// A connection was made (again): the server is given the logging level hosts asked for
    /// and subscribed to every resource a host holds a subscription to (a restarted server
    /// knows neither).
    pub(super) fn restore(self: &Arc<Self>) {
        let caps = self.capabilities().unwrap_or_default();
        let level = self
            .hosts
            .servers_level()
            .filter(|_| caps.logging.is_some());
        // On MCP 2026-07-28 the listen stream names them (`listen.rs`).
        let uris = if caps.resources.as_ref().and_then(|r| r.subscribe) == Some(true)
            && !self.listens_now()
        {
            self.hosts.subscriptions.of_server(&self.name)
        } else {
            Vec::new()
        };
        if level.is_none() && uris.is_empty() {
            return;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            if let Some(level) = level {
                let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(
                    SetLevelRequestParams::new(level),
                ));
                let _ = me.request(request, "`logging/setLevel`").await;
            }
            for uri in uris {
                let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(
                    SubscribeRequestParams::new(uri.clone()),
                ));
                if let Err(e) = me
                    .request(request, &format!("`resources/subscribe` of `{uri}`"))
                    .await
                {
                    tracing::warn!(server = %me.name, "MCP server `{}` was not subscribed again to {uri:?}: {}", me.name, crate::names::printable(&e.message, 300));
                }
            }
        });
    }
}

impl Upstream {
    /// A host's roots changed (`notifications/roots/list_changed`): the server is told, and
    /// asks again (the gateway relays its `roots/list`).
    pub(crate) async fn roots_changed(&self) {
        if let Some(conn) = self.conn.load_full().filter(|c| c.alive()) {
            let _ = conn.client.peer().notify_roots_list_changed().await;
        }
    }
}
