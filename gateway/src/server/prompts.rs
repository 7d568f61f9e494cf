//! Prompts and completions through the gateway: every server's prompts in one list, named by
//! the tools' rule (`{server}__{prompt}`: always prefixed, so they never collide and never
//! change when other servers come or go), `prompts/get` and `completion/complete` routed back
//! to the server by that name (a prompt's argument) or by the resource template's URI (a
//! template's argument, `resources.rs`). What comes back is the server's, as it wrote it.

use std::sync::Arc;

use rmcp::model::{
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, ErrorCode,
    GetPromptRequest, GetPromptRequestParams, GetPromptResponse, ListPromptsResult, Prompt,
    Reference, ResultType, ServerResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use super::GatewayServer;
use crate::names::{self, NameError};
use crate::upstream::Upstream;

impl GatewayServer {
    /// Every server's prompts, under `{server}__{prompt}` (a prompt whose name cannot be shown
    /// so is left out).
    pub(super) async fn prompts(&self) -> ListPromptsResult {
        let lists = self.gw.upstreams().listed::<Prompt>().await;
        let all = lists.iter().flat_map(|(server, list)| {
            list.iter().filter_map(move |p| {
                let mut p = p.clone();
                p.name = names::shown_prompt(server, &p.name).ok()?;
                Some(p)
            })
        });
        ListPromptsResult::with_all_items(all.collect())
    }

    /// The server of a prompt named `{server}__{prompt}`, and the prompt's own name.
    fn prompt_of<'a>(&self, name: &'a str) -> Result<(Arc<Upstream>, &'a str), McpError> {
        let unknown = |why: &str| {
            McpError::invalid_params(
                format!("unknown prompt `{}`: {why}", names::printable(name, 200)),
                None,
            )
        };
        match names::split_prompt(name) {
            Ok((server, prompt)) => match self.gw.upstreams().get(server) {
                Some(u) => Ok((Arc::clone(u), prompt)),
                None => Err(unknown(&format!(
                    "no MCP server `{server}` behind this gateway"
                ))),
            },
            Err(NameError::NoServer) => Err(unknown(
                "the gateway's prompts are named {server}__{prompt} (list them with prompts/list)",
            )),
            Err(NameError::Invalid(why)) => Err(unknown(&why)),
        }
    }

    /// `prompts/get`, from the prompt's server.
    pub(super) async fn get_prompt_of(
        &self,
        mut request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let shown = request.name.clone();
        let (upstream, own) = self.prompt_of(&shown)?;
        request.name = own.to_owned();
        let what = format!("`prompts/get` of `{}`", names::printable(&shown, 200));
        let calling = upstream
            .callers
            .enter(self.host, context.peer.clone(), context.id.clone());
        let answer = upstream
            .request_from(
                ClientRequest::GetPromptRequest(GetPromptRequest::new(request)),
                &what,
                Some(&calling),
            )
            .await?;
        match answer {
            ServerResult::GetPromptResult(mut r) => {
                // A host on 2026-07-28 requires it; rmcp strips it for older hosts.
                r.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(GetPromptResponse::Complete(r))
            }
            ServerResult::InputRequiredResult(r) => Ok(GetPromptResponse::InputRequired(r)),
            _ => Err(McpError::internal_error(
                format!(
                    "{what}: MCP server `{}` answered something else",
                    upstream.name
                ),
                None,
            )),
        }
    }

    /// `completion/complete`, from the server of the prompt or the resource template.
    pub(super) async fn complete_of(
        &self,
        mut request: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let (upstream, what) = match &mut request.r#ref {
            Reference::Prompt(p) => {
                let shown = p.name.clone();
                let (upstream, own) = self.prompt_of(&shown)?;
                p.name = own.to_owned();
                (
                    upstream,
                    format!(
                        "`completion/complete` of prompt `{}`",
                        names::printable(&shown, 200)
                    ),
                )
            }
            Reference::Resource(r) => {
                let shown = r.uri.clone();
                let routed = self.route(&shown).await?;
                r.uri = routed.uri;
                (
                    routed.upstream,
                    format!(
                        "`completion/complete` of template `{}`",
                        names::printable(&shown, 300)
                    ),
                )
            }
            _ => {
                return Err(McpError::invalid_params(
                    "a completion refers to a prompt or a resource template",
                    None,
                ))
            }
        };
        if upstream
            .capabilities()
            .is_some_and(|c| c.completions.is_none())
        {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("MCP server `{}` does not offer completions", upstream.name),
                None,
            ));
        }
        let calling = upstream
            .callers
            .enter(self.host, context.peer.clone(), context.id.clone());
        match upstream
            .request_from(
                ClientRequest::CompleteRequest(CompleteRequest::new(request)),
                &what,
                Some(&calling),
            )
            .await?
        {
            ServerResult::CompleteResult(mut r) => {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(r)
            }
            _ => Err(McpError::internal_error(
                format!(
                    "{what}: MCP server `{}` answered something else",
                    upstream.name
                ),
                None,
            )),
        }
    }
}
