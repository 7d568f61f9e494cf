//! A host that closed its `subscriptions/listen` stream over streamable HTTP (MCP
//! 2026-07-28), told to the gateway's `listen` before rmcp learns it.
//!
//! Closing the stream is how such a host ends a subscription (there is no cancel message on
//! HTTP). rmcp notices when the stream's body is dropped: it cancels the request and stops the
//! request's service at once, and the subscription's final result, which it still sends once
//! `listen` returns, meets a stream already gone — `ERROR rmcp::service: failed to send pending
//! response during drain`, once for every host that leaves. So `/mcp` (`http/mcp.rs`) marks
//! each `subscriptions/listen` request with a [`HostGone`] and, when the host's side of the
//! stream is dropped, cancels it first and reads what is left of the body itself (at most
//! [`DRAIN`]): `listen` returns, its final result goes out into that read and nowhere else, the
//! stream ends as the protocol ends it, and nothing is logged.

use std::time::Duration;

use rmcp::service::SubscriptionContext;
use tokio_util::sync::CancellationToken;

/// How long what is left of a closed stream is read before it is dropped anyway.
pub(crate) const DRAIN: Duration = Duration::from_secs(5);

/// Cancelled when the host's side of a `subscriptions/listen` stream is gone (a request
/// extension set by `/mcp`).
#[derive(Debug, Clone, Default)]
pub(crate) struct HostGone(pub(crate) CancellationToken);

/// Waits until the subscription ends: rmcp cancels it (a stdio host's cancel, the gateway
/// stopping), or its host closed its HTTP stream ([`HostGone`]).
pub(crate) async fn ended(context: &SubscriptionContext) {
    let gone = context
        .request_context()
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<HostGone>())
        .map(|g| g.0.clone());
    match gone {
        Some(gone) => {
            tokio::select! {
                () = context.cancelled() => {}
                () = gone.cancelled() => {}
            }
        }
        None => context.cancelled().await,
    }
}
