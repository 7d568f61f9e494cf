//! A scripted completion model for rig 0.44: a `Transport` for rig's public scripted wire
//! (`rig_core::test_utils::MockScript`, feature `test-utils`), the way rig's own tests drive an
//! agent. Each model request pops one scripted [`Turn`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rig_core::completion::{CompletionRequest, Usage};
use rig_core::driver::{Exchange, Model, Opened, Opening, Transport};
use rig_core::error::ProviderError;
use rig_core::test_utils::{mock_final, MockFrame, MockScript, MockStreamEvent};

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// Tool calls `(call id, tool name, arguments)`, in order.
    Calls(Vec<(&'static str, &'static str, serde_json::Value)>),
    /// A final text answer.
    Text(&'static str),
}

/// The scripted "model": answers each request with the next [`Turn`].
#[derive(Debug, Clone)]
pub struct Scripted {
    turns: Arc<Mutex<VecDeque<Turn>>>,
}

impl Scripted {
    /// A rig model that plays `turns` in order (and fails once they run out).
    pub fn model(turns: Vec<Turn>) -> Model<MockScript, Scripted> {
        let transport = Scripted {
            turns: Arc::new(Mutex::new(turns.into())),
        };
        Model::new(MockScript::new("scripted").with_id("scripted-1"), transport)
    }
}

impl Transport<MockScript> for Scripted {
    fn send(&self, _request: CompletionRequest, _exchange: Exchange) -> Opening<MockFrame> {
        let turn = self.turns.lock().ok().and_then(|mut t| t.pop_front());
        let Some(turn) = turn else {
            return Opening::failed(ProviderError::Provider("script exhausted".into()));
        };
        let mut frames: Vec<Result<MockFrame, ProviderError>> = Vec::new();
        match turn {
            Turn::Calls(calls) => {
                for (id, name, args) in calls {
                    frames.push(Ok(MockFrame::Event(MockStreamEvent::ToolCall {
                        id: id.into(),
                        name: name.into(),
                        arguments: args,
                        call_id: None,
                    })));
                }
            }
            Turn::Text(t) => frames.push(Ok(MockFrame::Event(MockStreamEvent::Text(t.into())))),
        }
        frames.push(Ok(MockFrame::Event(MockStreamEvent::FinalResponse(
            mock_final(Usage::default()),
        ))));
        // The same frames serve the unary (`.await`) and streaming (`.stream()`) surfaces.
        Opening::ready(Opened::new(futures::stream::iter(frames)))
    }
}
