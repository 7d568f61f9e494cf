//! Requests from a server to a host — sampling (`sampling/createMessage`), elicitation
//! (`elicitation/create`), roots (`roots/list`) — relayed to the host that made the call, and
//! its answer back.
//!
//! The gateway offers all three to its servers (it cannot know at their handshake which hosts
//! will come: the connection is shared and made before any host), and answers each request with
//! what **the host whose request the server is serving** answers:
//!
//! 1. every request a host sends through the gateway to a server (`tools/call`,
//!    `resources/read`, `prompts/get`, `completion/complete`) is a [`Caller`] of that server
//!    while it is under way;
//! 2. a server's request that arrives on the stream of one of them (streamable HTTP says which)
//!    goes to that caller's host; otherwise (stdio says nothing) to the one host with requests
//!    under way on that server; with none under way, to the one host connected, if there is only
//!    one (a stdio gateway's host: `roots/list` right after a server starts);
//! 3. it is refused, with an error saying why, when no host or several hosts could have made
//!    it, when that host did not offer the capability at its handshake (elicitation: the mode
//!    asked, form or URL), or when it speaks MCP 2026-07-28, which has no requests from server
//!    to client.
//!
//! A server often asks for roots right after its handshake, before any host came; so when a
//! host that offers roots connects and is the only one, every server is told the roots changed
//! (`notifications/roots/list_changed`), and asks again.
//!
//! A host over streamable HTTP is sent the request on the stream of its own request (the
//! response stream of its `tools/call`), as a server it talks to directly would; a stdio host on
//! its only stream. When the server gives up (its `notifications/cancelled`), the host is told
//! too. Hosts answer in their own time (a user filling a form): the server's own timeout bounds
//! the wait.

#![allow(deprecated)] // sampling and roots are deprecated by SEP-2577, and still what hosts use

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ClientResult, ElicitRequestParams, ErrorCode, RequestId, ServerRequest};
use rmcp::service::{OriginatingRequestId, Peer, PeerRequestOptions, RequestContext};
use rmcp::{ErrorData as McpError, RoleClient, RoleServer};

use crate::notify::Hosts;

/// One host request under way on a server.
#[derive(Clone)]
struct Caller {
    host: u64,
    peer: Peer<RoleServer>,
    /// The host's request's id (its stream, over HTTP).
    request: RequestId,
    /// The id of the gateway's request to the server, once sent.
    upstream: Arc<Mutex<Option<RequestId>>>,
}

/// The host requests under way on one server.
#[derive(Default)]
pub(crate) struct Callers {
    next: AtomicU64,
    under_way: Mutex<HashMap<u64, Caller>>,
}

impl std::fmt::Debug for Callers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callers")
            .field("under_way", &self.lock().len())
            .finish()
    }
}

/// A host request under way, until dropped.
#[derive(Debug)]
pub(crate) struct Calling<'a> {
    callers: &'a Callers,
    id: u64,
    upstream: Arc<Mutex<Option<RequestId>>>,
}

impl Calling<'_> {
    /// What the client calls with the id of the request it sent the server (see
    /// `ToolHealthClient::call_tool_told`).
    pub(crate) fn sent(&self) -> impl FnOnce(&RequestId) + Send + 'static {
        let slot = Arc::clone(&self.upstream);
        move |id: &RequestId| {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(id.clone());
        }
    }
}

impl Drop for Calling<'_> {
    fn drop(&mut self) {
        self.callers.lock().remove(&self.id);
    }
}

impl Callers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Caller>> {
        self.under_way
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Host `host` (reached through `peer`) sends request `request` to the server: a caller
    /// until the guard drops.
    pub(crate) fn enter(
        &self,
        host: u64,
        peer: Peer<RoleServer>,
        request: RequestId,
    ) -> Calling<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let upstream = Arc::new(Mutex::new(None));
        self.lock().insert(
            id,
            Caller {
                host,
                peer,
                request,
                upstream: Arc::clone(&upstream),
            },
        );
        Calling {
            callers: self,
            id,
            upstream,
        }
    }

    /// The caller whose request to the server has id `upstream`.
    fn by_upstream(&self, upstream: &RequestId) -> Option<Caller> {
        self.lock()
            .values()
            .find(|c| {
                c.upstream
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    == Some(upstream)
            })
            .cloned()
    }

    /// The one host with requests under way (its latest), `Err(n)` when `n` hosts have (0 or
    /// several).
    fn only_host(&self) -> Result<Caller, usize> {
        let map = self.lock();
        let mut hosts: Vec<u64> = map.values().map(|c| c.host).collect();
        hosts.sort_unstable();
        hosts.dedup();
        if hosts.len() != 1 {
            return Err(hosts.len());
        }
        map.iter()
            .max_by_key(|(id, _)| **id)
            .map(|(_, c)| c.clone())
            .ok_or(0)
    }
}

/// What a server asks: the method, and what the host must have offered.
fn method(request: &ServerRequest) -> &'static str {
    match request {
        ServerRequest::CreateMessageRequest(_) => "sampling/createMessage",
        ServerRequest::ListRootsRequest(_) => "roots/list",
        ServerRequest::ElicitRequest(_) => "elicitation/create",
        ServerRequest::PingRequest(_) => "ping",
        _ => "a request",
    }
}

/// Whether the host of `peer` offered what `request` needs; why not, when it did not.
fn offered(peer: &Peer<RoleServer>, request: &ServerRequest) -> Result<(), String> {
    let Some(info) = peer.peer_info() else {
        return Err("it did not complete an MCP handshake".to_owned());
    };
    if info.protocol_version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str() {
        return Err(format!(
            "it speaks MCP {}, which has no requests from server to client",
            info.protocol_version
        ));
    }
    let caps = &info.capabilities;
    let ok = match request {
        ServerRequest::CreateMessageRequest(_) => caps.sampling.is_some(),
        ServerRequest::ListRootsRequest(_) => caps.roots.is_some(),
        ServerRequest::ElicitRequest(r) => match (&caps.elicitation, &r.params) {
            (None, _) => false,
            (Some(e), ElicitRequestParams::UrlElicitationParams { .. }) => e.url.is_some(),
            // A capability naming no mode means form (MCP 2025-06-18).
            (Some(e), _) => e.form.is_some() || e.url.is_none(),
        },
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        let what = match request {
            ServerRequest::ElicitRequest(r)
                if matches!(r.params, ElicitRequestParams::UrlElicitationParams { .. }) =>
            {
                "URL elicitation"
            }
            ServerRequest::ElicitRequest(_) => "elicitation",
            ServerRequest::CreateMessageRequest(_) => "sampling",
            _ => "roots",
        };
        Err(format!("it did not offer {what} at its handshake"))
    }
}

/// Relays `request` from server `server` (whose host requests under way are `callers`) to the
/// host that made the call, and its answer back (see the module docs).
pub(crate) async fn relay(
    server: &str,
    callers: &Callers,
    hosts: &Hosts,
    request: ServerRequest,
    context: RequestContext<RoleClient>,
) -> Result<ClientResult, McpError> {
    let method = method(&request);
    let refused = |why: String| {
        McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "tool-health-gateway cannot relay `{method}` from MCP server `{server}`: {why}"
            ),
            None,
        )
    };
    // The stream it came on (streamable HTTP), else the one host with requests under way, else
    // the one host connected.
    let on_stream = match context
        .extensions
        .get::<rmcp::service::InboundStreamOrigin>()
    {
        Some(rmcp::service::InboundStreamOrigin::OutboundRequest(id)) => callers.by_upstream(id),
        _ => None,
    };
    let (peer, originating) = match on_stream.map(Ok).unwrap_or_else(|| callers.only_host()) {
        Ok(caller) => (caller.peer, Some(caller.request)),
        Err(0) => match hosts.sessions().as_slice() {
            [(_, peer)] => (peer.clone(), None),
            [] => {
                return Err(refused(
                    "no host is connected to the gateway to answer it".to_owned(),
                ))
            }
            more => {
                return Err(refused(format!(
                    "it came while no host request was under way on `{server}`, and {} hosts \
                     are connected: the gateway cannot tell which one it is for",
                    more.len()
                )))
            }
        },
        Err(n) => {
            return Err(refused(format!(
                "{n} hosts have requests under way on `{server}` and the server did not say \
                 which one it asks for (over stdio it cannot): the gateway cannot tell which host \
                 to ask"
            )))
        }
    };
    offered(&peer, &request)
        .map_err(|why| refused(format!("the host that made the call: {why}")))?;
    let mut request = request;
    if let Some(id) = originating {
        // Over streamable HTTP, on the stream of the host's own request.
        rmcp::model::GetExtensions::extensions_mut(&mut request).insert(OriginatingRequestId(id));
    }
    // Sent from a task of its own: the handler's task carries the server's request as its
    // origin, which would take the host's stream's place.
    let sending = tokio::spawn(async move {
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        Ok::<_, rmcp::service::ServiceError>(handle)
    });
    let handle = match sending.await {
        Ok(Ok(handle)) => handle,
        Ok(Err(e)) => return Err(refused(format!("the host could not be sent it: {e}"))),
        Err(_) => return Err(refused("the send was lost".to_owned())),
    };
    let id = handle.id.clone();
    let peer = handle.peer.clone();
    tokio::select! {
        answer = handle.await_response() => match answer {
            Ok(result) => Ok(result),
            Err(rmcp::service::ServiceError::McpError(e)) => Err(e),
            Err(e) => Err(McpError::internal_error(
                format!("the host did not answer `{method}`: {e}"),
                None,
            )),
        },
        () = context.ct.cancelled() => {
            // The server gave up: so does the host.
            let _ = peer
                .notify_cancelled(rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some(format!("MCP server `{server}` cancelled it")),
                ))
                .await;
            Err(McpError::internal_error("cancelled by the server", None))
        }
    }
}
