//! Resources through the gateway: every server's resources and templates in one list, each URI
//! under its server, reads and subscriptions routed back to the server that has the resource.
//!
//! **The gateway's URIs.** A resource `demo://resource/static/document/a.md` of server `ev` is
//! listed as `tool-health://ev/demo://resource/static/document/a.md`, a template likewise — one
//! rule, the tools' `{server}__{tool}` for URIs: always prefixed, so two servers' `file:///README.md`
//! never collide, and a URI never changes when another server comes or goes. The server's own
//! URI is kept whole after the prefix (hosts show it, and a reader sees where it comes from).
//!
//! **The servers' own URIs are read too.** Tool results and prompts are passed on as the server
//! wrote them (a model may hand a URI back to the same server's tools, which know only their
//! own), so a host may ask for a URI it found there: `resources/read` of a URI without the
//! prefix goes to the server that listed it or whose template it fits — the one server with
//! resources, when only one has — and is refused, naming the prefixed forms to use, when
//! several could have it. A read answers under the URI the host asked for.

use std::sync::Arc;

use futures_util::future::join_all;
use rmcp::model::{
    ClientRequest, ErrorCode, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse, Resource,
    ResourceContents, ResourceTemplate, ResultType, ServerResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use super::GatewayServer;
use crate::names::{self, HostUri, NameError};
use crate::notify::subscriptions::{Subscribed, MAX_SUBSCRIPTIONS};
use crate::upstream::Upstream;

/// A URI a host named, routed: the server, its own URI, and whether the host used the
/// gateway's form.
pub(super) struct Routed {
    pub(super) upstream: Arc<Upstream>,
    pub(super) uri: String,
    pub(super) shown: bool,
}

fn not_found(uri: &str, why: &str) -> McpError {
    McpError::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("resource `{}` not found: {why}", names::printable(uri, 300)),
        None,
    )
}

impl GatewayServer {
    /// Every server's resources, under the gateway's URIs.
    pub(super) async fn resources(&self) -> ListResourcesResult {
        let lists = self.gw.upstreams().listed::<Resource>().await;
        let all = lists.iter().flat_map(|(server, list)| {
            list.iter().filter_map(move |r| {
                let mut r = r.clone();
                r.uri = names::shown_uri(server, &r.uri)?;
                Some(r)
            })
        });
        ListResourcesResult::with_all_items(all.collect())
    }

    /// Every server's resource templates, under the gateway's URIs.
    pub(super) async fn templates(&self) -> ListResourceTemplatesResult {
        let lists = self.gw.upstreams().listed::<ResourceTemplate>().await;
        let all = lists.iter().flat_map(|(server, list)| {
            list.iter().filter_map(move |t| {
                let mut t = t.clone();
                t.uri_template = names::shown_uri(server, &t.uri_template)?;
                Some(t)
            })
        });
        ListResourceTemplatesResult::with_all_items(all.collect())
    }

    /// The server a URI a host named belongs to (see the module docs).
    pub(super) async fn route(&self, uri: &str) -> Result<Routed, McpError> {
        let upstreams = self.gw.upstreams();
        match names::host_uri(uri) {
            Err(NameError::Invalid(why)) => Err(McpError::invalid_params(
                format!("invalid resource URI: {why}"),
                None,
            )),
            Err(NameError::NoServer) => Err(McpError::invalid_params("invalid resource URI", None)),
            Ok(HostUri::Shown { server, uri: own }) => {
                let found = upstreams.get(server).cloned().or_else(|| {
                    // A host may have lowered the case of the part that looks like a host name.
                    let mut same = upstreams
                        .iter()
                        .filter(|u| u.name.eq_ignore_ascii_case(server));
                    match (same.next(), same.next()) {
                        (Some(u), None) => Some(Arc::clone(u)),
                        _ => None,
                    }
                });
                match found {
                    Some(upstream) => Ok(Routed {
                        upstream,
                        uri: own.to_owned(),
                        shown: true,
                    }),
                    None => Err(not_found(
                        uri,
                        &format!(
                            "no MCP server `{}` behind this gateway",
                            names::printable(server, 64)
                        ),
                    )),
                }
            }
            Ok(HostUri::Raw(own)) => {
                let claims = |upstreams: &crate::upstream::Upstreams| -> Vec<Arc<Upstream>> {
                    upstreams
                        .iter()
                        .filter(|u| {
                            u.last_listed::<Resource>().iter().any(|r| r.uri == own)
                                || u.last_listed::<ResourceTemplate>()
                                    .iter()
                                    .any(|t| names::fits_template(&t.uri_template, own))
                        })
                        .cloned()
                        .collect()
                };
                let mut claimed = claims(&upstreams);
                if claimed.is_empty() {
                    // Lists not read yet, or changed: read them once.
                    join_all(upstreams.iter().map(|u| async move {
                        u.listed::<Resource>().await;
                        u.listed::<ResourceTemplate>().await;
                    }))
                    .await;
                    claimed = claims(&upstreams);
                }
                if claimed.is_empty() {
                    let mut with = upstreams
                        .iter()
                        .filter(|u| u.capabilities().is_some_and(|c| c.resources.is_some()));
                    if let (Some(u), None) = (with.next(), with.next()) {
                        claimed.push(Arc::clone(u));
                    }
                }
                match claimed.as_slice() {
                    [one] => Ok(Routed {
                        upstream: Arc::clone(one),
                        uri: own.to_owned(),
                        shown: false,
                    }),
                    [] => Err(not_found(
                        uri,
                        "no MCP server behind this gateway lists it or has a template it fits \
                         (the gateway's resources are named tool-health://{server}/{uri})",
                    )),
                    several => Err(McpError::invalid_params(
                        format!(
                            "resource `{}` is ambiguous: {} MCP servers behind this gateway could \
                             have it; name it {}",
                            names::printable(uri, 300),
                            several.len(),
                            several
                                .iter()
                                .filter_map(|u| names::shown_uri(&u.name, own))
                                .map(|s| format!("`{}`", names::printable(&s, 300)))
                                .collect::<Vec<_>>()
                                .join(" or ")
                        ),
                        None,
                    )),
                }
            }
        }
    }

    /// `resources/read`, from the server that has it, answered under the URI the host asked.
    pub(super) async fn read(
        &self,
        mut request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let asked = request.uri.clone();
        let routed = self.route(&asked).await?;
        let server = Arc::clone(&routed.upstream.name);
        request.uri = routed.uri.clone();
        let what = format!("`resources/read` of `{}`", names::printable(&asked, 300));
        let calling =
            routed
                .upstream
                .callers
                .enter(self.host, context.peer.clone(), context.id.clone());
        let answer = routed
            .upstream
            .request_from(
                ClientRequest::ReadResourceRequest(ReadResourceRequest::new(request)),
                &what,
                Some(&calling),
            )
            .await?;
        match answer {
            ServerResult::ReadResourceResult(mut r) => {
                // A host on 2026-07-28 requires it; rmcp strips it for older hosts.
                r.result_type.get_or_insert(ResultType::COMPLETE);
                if routed.shown {
                    for c in &mut r.contents {
                        let uri = match c {
                            ResourceContents::TextResourceContents { uri, .. }
                            | ResourceContents::BlobResourceContents { uri, .. } => uri,
                            _ => continue,
                        };
                        if let Some(shown) = names::shown_uri(&server, uri) {
                            *uri = shown;
                        }
                    }
                }
                Ok(ReadResourceResponse::Complete(r))
            }
            ServerResult::InputRequiredResult(r) => Ok(ReadResourceResponse::InputRequired(r)),
            _ => Err(McpError::internal_error(
                format!("{what}: MCP server `{server}` answered something else"),
                None,
            )),
        }
    }

    /// `resources/subscribe`: the server is subscribed when the first host subscribes.
    pub(super) async fn subscribe(&self, uri: &str) -> Result<(), McpError> {
        let routed = self.route(uri).await?;
        let u = &routed.upstream;
        let subscribes = u
            .capabilities()
            .and_then(|c| c.resources)
            .and_then(|r| r.subscribe)
            == Some(true);
        if !subscribes {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "MCP server `{}` does not offer resource subscriptions",
                    u.name
                ),
                None,
            ));
        }
        match self
            .gw
            .hosts
            .subscriptions
            .subscribe(self.host, &u.name, &routed.uri, uri)
        {
            Subscribed::Already => Ok(()),
            Subscribed::Full => Err(McpError::internal_error(
                format!(
                    "the gateway holds {} resource subscriptions already, its most",
                    MAX_SUBSCRIPTIONS
                ),
                None,
            )),
            Subscribed::First => {
                let what = format!("`resources/subscribe` of `{}`", names::printable(uri, 300));
                match u.watch_resource(&routed.uri, true, &what).await {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        self.gw
                            .hosts
                            .subscriptions
                            .unsubscribe(self.host, &u.name, &routed.uri);
                        Err(e)
                    }
                }
            }
        }
    }

    /// `resources/unsubscribe`: the server is unsubscribed when the last host unsubscribes.
    pub(super) async fn unsubscribe(&self, uri: &str) -> Result<(), McpError> {
        let routed = self.route(uri).await?;
        let u = &routed.upstream;
        if self
            .gw
            .hosts
            .subscriptions
            .unsubscribe(self.host, &u.name, &routed.uri)
        {
            let what = format!(
                "`resources/unsubscribe` of `{}`",
                names::printable(uri, 300)
            );
            u.watch_resource(&routed.uri, false, &what).await?;
        }
        Ok(())
    }
}
