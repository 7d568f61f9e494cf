//! A scripted model for adk-rust 2.3: an [`adk_core::Llm`] that answers each request with the
//! next scripted [`Turn`] (the way adk's own tests drive an agent), and the agent run through
//! adk's real `Runner` with an in-memory session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use adk_core::{
    Agent, Content, FinishReason, Llm, LlmRequest, LlmResponse, LlmResponseStream, Part, SessionId,
    UserId,
};
use adk_session::{CreateRequest, InMemorySessionService, SessionService};
use futures::StreamExt;

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Function calls `(call id, tool name, arguments)`, in order.
    Calls(Vec<(&'static str, &'static str, serde_json::Value)>),
    /// A final text answer.
    Text(&'static str),
}

/// The scripted "model": answers each request with the next [`Turn`], then "done".
#[derive(Debug, Clone)]
pub struct Scripted {
    turns: Arc<Mutex<VecDeque<Turn>>>,
}

impl Scripted {
    /// A model that plays `turns` in order.
    pub fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Self {
            turns: Arc::new(Mutex::new(turns.into())),
        })
    }
}

#[async_trait::async_trait]
impl Llm for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn generate_content(
        &self,
        _req: LlmRequest,
        _stream: bool,
    ) -> adk_core::Result<LlmResponseStream> {
        let turn = self.turns.lock().ok().and_then(|mut t| t.pop_front());
        let parts = match turn.unwrap_or(Turn::Text("done")) {
            Turn::Calls(calls) => calls
                .into_iter()
                .map(|(id, name, args)| Part::FunctionCall {
                    name: name.into(),
                    args,
                    id: Some(id.into()),
                    thought_signature: None,
                })
                .collect(),
            Turn::Text(text) => vec![Part::Text { text: text.into() }],
        };
        let response = LlmResponse {
            content: Some(Content {
                role: "model".into(),
                parts,
            }),
            finish_reason: Some(FinishReason::Stop),
            turn_complete: true,
            ..Default::default()
        };
        Ok(Box::pin(futures::stream::once(async move { Ok(response) })))
    }
}

/// Runs `agent` once through adk's `Runner` (in-memory sessions) to the end of its event
/// stream; the events' errors are returned, not raised (a failing tool is not an error of the
/// run).
pub async fn run(agent: Arc<dyn Agent>, prompt: &str) -> Vec<String> {
    let sessions = Arc::new(InMemorySessionService::new());
    sessions
        .create(CreateRequest {
            app_name: "tool-health".into(),
            user_id: "user".into(),
            session_id: Some("session".into()),
            state: Default::default(),
        })
        .await
        .expect("in-memory session");
    let runner = adk_runner::Runner::builder()
        .app_name("tool-health")
        .agent(agent)
        .session_service(sessions as Arc<dyn SessionService>)
        .build()
        .expect("adk runner");
    let mut events = runner
        .run(
            UserId::new("user").expect("user id"),
            SessionId::new("session").expect("session id"),
            Content::new("user").with_text(prompt),
        )
        .await
        .expect("adk run");
    let mut errors = Vec::new();
    while let Some(event) = events.next().await {
        if let Err(e) = event {
            errors.push(e.to_string());
        }
    }
    errors
}
