//! A scripted model for swiftide 0.32: a [`ChatCompletion`] that answers each request with the
//! next scripted [`Turn`] (the way swiftide's own tests drive an agent).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use swiftide_core::chat_completion::errors::LanguageModelError;
use swiftide_core::chat_completion::{
    ChatCompletion, ChatCompletionRequest, ChatCompletionResponse, ToolCall,
};

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
    /// A model that plays `turns` in order.
    pub fn new(turns: Vec<Turn>) -> Self {
        Self {
            turns: Arc::new(Mutex::new(turns.into())),
        }
    }
}

#[async_trait::async_trait]
impl ChatCompletion for Scripted {
    async fn complete(
        &self,
        _request: &ChatCompletionRequest,
    ) -> Result<ChatCompletionResponse, LanguageModelError> {
        let turn = self.turns.lock().ok().and_then(|mut t| t.pop_front());
        let mut response = ChatCompletionResponse::builder();
        match turn.unwrap_or(Turn::Text("done")) {
            Turn::Calls(calls) => {
                let calls = calls
                    .into_iter()
                    .map(|(id, name, args)| {
                        ToolCall::builder()
                            .id(id)
                            .name(name)
                            .args(args)
                            .build()
                            .expect("a scripted tool call")
                    })
                    .collect::<Vec<_>>();
                response.tool_calls(calls);
            }
            Turn::Text(text) => {
                response.message(text);
            }
        }
        Ok(response.build().expect("a scripted response"))
    }
}
