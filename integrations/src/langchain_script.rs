//! A scripted LLM for langchain-rust 7.0 (the crate's own fake is `#[cfg(test)]`): each
//! `generate` pops one scripted result, typed tool calls or a final text, which
//! `OpenAiToolAgent` turns into tool calls.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::Stream;
use langchain_rust::language_models::llm::LLM;
use langchain_rust::language_models::{GenerateResult, LLMError};
use langchain_rust::schemas::{Message, StreamData, ToolCall};

/// The scripted LLM.
#[derive(Debug, Clone)]
pub struct ScriptedLlm {
    script: Arc<Mutex<VecDeque<GenerateResult>>>,
}

impl ScriptedLlm {
    /// An LLM that answers with `results` in order.
    pub fn new(results: Vec<GenerateResult>) -> Self {
        Self {
            script: Arc::new(Mutex::new(results.into())),
        }
    }
}

/// A turn of tool calls `(call id, tool name, arguments as JSON text)`.
pub fn calls(calls: &[(&str, &str, &str)]) -> GenerateResult {
    GenerateResult::default().with_tool_calls(
        calls
            .iter()
            .map(|(id, name, args)| ToolCall::new(*id, *name, *args))
            .collect(),
    )
}

/// A final text answer.
pub fn text(t: &str) -> GenerateResult {
    GenerateResult {
        generation: t.into(),
        ..Default::default()
    }
}

#[async_trait]
impl LLM for ScriptedLlm {
    async fn generate(&self, _messages: &[Message]) -> Result<GenerateResult, LLMError> {
        self.script
            .lock()
            .ok()
            .and_then(|mut s| s.pop_front())
            .ok_or_else(|| LLMError::OtherError("script exhausted".into()))
    }

    async fn stream(
        &self,
        _messages: &[Message],
    ) -> Result<Pin<Box<dyn Stream<Item = Result<StreamData, LLMError>> + Send>>, LLMError> {
        Err(LLMError::OtherError("no streaming in the script".into()))
    }
}
