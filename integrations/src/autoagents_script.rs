//! A scripted model for autoagents 0.4: an [`LLMProvider`] whose `chat_with_tools` answers
//! each request with the next scripted [`Turn`] (the way autoagents' own tests mock a
//! provider).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use autoagents::llm::chat::{
    ChatMessage, ChatProvider, ChatResponse, StructuredOutputFormat, Tool,
};
use autoagents::llm::completion::{CompletionProvider, CompletionRequest, CompletionResponse};
use autoagents::llm::embedding::EmbeddingProvider;
use autoagents::llm::error::LLMError;
use autoagents::llm::models::ModelsProvider;
use autoagents::llm::{FunctionCall, LLMProvider, ToolCall};

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Tool calls `(call id, tool name, arguments as JSON text)`, in order.
    Calls(Vec<(&'static str, &'static str, &'static str)>),
    /// A final text answer.
    Text(&'static str),
}

/// The scripted "model": answers each request with the next [`Turn`] (a text answer once they
/// run out).
#[derive(Debug, Clone)]
pub struct Scripted {
    turns: Arc<Mutex<VecDeque<Turn>>>,
}

impl Scripted {
    /// A provider that plays `turns` in order.
    pub fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Self {
            turns: Arc::new(Mutex::new(turns.into())),
        })
    }
}

#[derive(Debug)]
struct Response(Turn);

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Turn::Text(t) => f.write_str(t),
            Turn::Calls(_) => Ok(()),
        }
    }
}

impl ChatResponse for Response {
    fn text(&self) -> Option<String> {
        match &self.0 {
            Turn::Text(t) => Some((*t).into()),
            Turn::Calls(_) => None,
        }
    }

    fn tool_calls(&self) -> Option<Vec<ToolCall>> {
        match &self.0 {
            Turn::Calls(calls) => Some(
                calls
                    .iter()
                    .map(|(id, name, args)| ToolCall {
                        id: (*id).into(),
                        call_type: "function".into(),
                        function: FunctionCall {
                            name: (*name).into(),
                            arguments: (*args).into(),
                        },
                    })
                    .collect(),
            ),
            Turn::Text(_) => None,
        }
    }
}

#[async_trait::async_trait]
impl ChatProvider for Scripted {
    async fn chat_with_tools(
        &self,
        _messages: &[ChatMessage],
        _tools: Option<&[Tool]>,
        _json_schema: Option<StructuredOutputFormat>,
    ) -> Result<Box<dyn ChatResponse>, LLMError> {
        let turn = self.turns.lock().ok().and_then(|mut t| t.pop_front());
        Ok(Box::new(Response(turn.unwrap_or(Turn::Text("done")))))
    }
}

#[async_trait::async_trait]
impl CompletionProvider for Scripted {
    async fn complete(
        &self,
        _req: &CompletionRequest,
        _json_schema: Option<StructuredOutputFormat>,
    ) -> Result<CompletionResponse, LLMError> {
        Ok(CompletionResponse {
            text: "done".into(),
        })
    }
}

#[async_trait::async_trait]
impl EmbeddingProvider for Scripted {
    async fn embed(&self, _input: Vec<String>) -> Result<Vec<Vec<f32>>, LLMError> {
        Err(LLMError::ProviderError("no embeddings".into()))
    }
}

#[async_trait::async_trait]
impl ModelsProvider for Scripted {}

impl LLMProvider for Scripted {}
