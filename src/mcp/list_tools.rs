//! The tool list: one page or all of them without what refuses now, the whole list read for
//! the argument check, and the listed tools declared to the registry.

use rmcp::model::{
    ClientRequest, ListToolsRequest, ListToolsResult, PaginatedRequestParams, ServerResult,
};
use rmcp::service::ServiceError;

use super::cache::merge_hints;
use super::client::ToolHealthClient;
use super::requests::server_outcome;
use super::server::ServerOutcome;
use super::tools::{HiddenBy, HiddenTool, ToolList};

impl ToolHealthClient {
    /// Reads the whole tool list for the argument check, through the server's admission
    /// `permit`. A server that cannot list (an error answer) leaves its tools unchecked; one
    /// that does not answer fails the call.
    pub(super) async fn read_schemas(
        &self,
        permit: crate::call::Permit,
    ) -> Result<(), ServiceError> {
        let started = self.registry.now();
        let mut tools = Vec::new();
        let mut cursor = None;
        let mut outcome = ServerOutcome::Answered;
        // Read to its last page: the server's whole list.
        let mut whole = false;
        // A server that keeps answering cursors is cut off after this many pages.
        for _ in 0..100 {
            let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let listed = self.send(list_request(params), self.timeout, None).await;
            outcome = server_outcome(&listed);
            match listed {
                Ok(ServerResult::ListToolsResult(page)) => {
                    tools.extend(page.tools);
                    cursor = page.next_cursor;
                    if cursor.is_none() {
                        whole = true;
                        break;
                    }
                }
                Ok(_) => break,
                Err(e) if outcome == ServerOutcome::Failed => {
                    self.server.record(
                        permit,
                        outcome,
                        self.registry.now().saturating_sub(started),
                    );
                    return Err(e);
                }
                Err(_) => break,
            }
        }
        self.server
            .record(permit, outcome, self.registry.now().saturating_sub(started));
        self.shared.schemas.update(&tools, true, whole);
        self.declare_listed(&tools);
        Ok(())
    }

    /// Declares the registry keys of the tools the server listed (issue 25): a declared tool
    /// always keeps its own breaker, whatever names the model invents. Names too long for the
    /// registry are left out; a list longer than the registry's cap is declared as far as it
    /// fits nothing (the call is all or nothing) and said once, with the fix.
    fn declare_listed(&self, tools: &[rmcp::model::Tool]) {
        let keys: Vec<String> = tools
            .iter()
            .map(|t| self.key(&t.name).into_owned())
            .filter(|k| self.registry.validate_name(k).is_ok())
            .collect();
        if let Err(e) = self.registry.declare_tools(&keys) {
            if !self
                .shared
                .declare_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    target: crate::observe::LOG_TARGET,
                    server = %self.server.name.escape_debug(),
                    "MCP server `{}` lists {} tools, more than the registry can declare ({e}): \
                     its tools are tracked as they are called, and past the cap share the \
                     overflow breaker; raise RegistryBuilder::max_tools (said once)",
                    self.server.name.escape_debug(),
                    keys.len()
                );
            }
        }
    }

    /// Lists the server's tools (one page: `params` carries the cursor), leaving out those
    /// whose breaker — or the server's — refuses now, and naming them in
    /// [`ToolList::hidden`]. Reading the list refreshes the argument check's schemas. While
    /// the server's breaker refuses, nothing is sent: the tools last listed are all hidden.
    ///
    /// A page the server gave a caching hint (`ttlMs` > 0, MCP 2026-07-28) is not asked for
    /// again before the hint runs out — nor before the server says its list changed, or the
    /// connection is new: it is answered from memory, filtered by the breakers now, with what
    /// is left of its `ttlMs` (`cache.rs`).
    pub async fn list_tools(
        &self,
        params: Option<PaginatedRequestParams>,
    ) -> Result<ToolList, ServiceError> {
        let first_page = params.as_ref().is_none_or(|p| p.cursor.is_none());
        let cursor = params.as_ref().and_then(|p| p.cursor.clone());
        if let Some(result) = self.shared.pages.get(cursor.as_ref(), self.registry.now()) {
            return Ok(match self.server.retry_after_now() {
                Some(retry_after) => self.all_hidden(retry_after),
                None => self.without_refused(result),
            });
        }
        let permit = match self.server_gate().await {
            Ok(permit) => permit,
            Err(retry_after) => return Ok(self.all_hidden(retry_after)),
        };
        let started = self.registry.now();
        let listed = self.send(list_request(params), self.timeout, None).await;
        self.server.record(
            permit,
            server_outcome(&listed),
            self.registry.now().saturating_sub(started),
        );
        let result = match listed? {
            ServerResult::ListToolsResult(result) => result,
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        self.shared.pages.put(cursor, &result, self.registry.now());
        self.shared
            .schemas
            .update(&result.tools, first_page, result.next_cursor.is_none());
        self.declare_listed(&result.tools);
        Ok(self.without_refused(result))
    }

    /// While the server's breaker refuses: nothing listed, the tools last listed all hidden.
    fn all_hidden(&self, retry_after: std::time::Duration) -> ToolList {
        let until = self.registry.now().saturating_add(retry_after);
        let hidden = self
            .shared
            .schemas
            .names()
            .into_iter()
            .map(|name| HiddenTool {
                key: self.key(&name).into_owned(),
                name,
                by: HiddenBy::Server,
                retry_after,
                until,
            })
            .collect();
        ToolList {
            result: ListToolsResult::with_all_items(Vec::new()),
            hidden,
        }
    }

    /// `result` without the tools whose breaker refuses now, and those as hidden.
    fn without_refused(&self, mut result: ListToolsResult) -> ToolList {
        let now = self.registry.now();
        let mut hidden = Vec::new();
        result.tools.retain(|tool| {
            let key = self.key(&tool.name).into_owned();
            match self.registry.snapshot(&key).and_then(|s| s.retry_after) {
                None => true,
                Some(retry_after) => {
                    hidden.push(HiddenTool {
                        name: tool.name.to_string(),
                        key,
                        by: HiddenBy::Tool,
                        retry_after,
                        until: now.saturating_add(retry_after),
                    });
                    false
                }
            }
        });
        ToolList { result, hidden }
    }

    /// Every page of [`list_tools`](Self::list_tools), as one list, whose caching hints are its
    /// least fresh page's (`ttlMs`; none when a page had none) and its most private page's.
    pub async fn list_all_tools(&self) -> Result<ToolList, ServiceError> {
        let mut all = self.list_tools(None).await?;
        let mut cursor = all.result.next_cursor.take();
        // A server that keeps answering cursors is cut off after this many pages.
        for _ in 0..1_000 {
            let Some(next) = cursor else {
                break;
            };
            let page = self
                .list_tools(Some(
                    PaginatedRequestParams::default().with_cursor(Some(next)),
                ))
                .await?;
            merge_hints(&mut all.result, &page.result);
            all.result.tools.extend(page.result.tools);
            all.hidden.extend(page.hidden);
            cursor = page.result.next_cursor;
        }
        Ok(all)
    }
}

fn list_request(params: Option<PaginatedRequestParams>) -> ClientRequest {
    ClientRequest::ListToolsRequest(match params {
        Some(params) => ListToolsRequest::with_param(params),
        None => ListToolsRequest::default(),
    })
}
