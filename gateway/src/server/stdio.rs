//! The host's stdio channel: one JSON-RPC message per line on stdin and stdout, with a clear
//! answer to whatever is not a message.
//!
//! rmcp's own stdio transport drops a line over its limit and input that is not JSON without a
//! word (the host's request then waits for its own timeout), and answers a message of the wrong
//! shape with an id-less `Invalid Request`. A host gets more from this one:
//!
//! | the line | the answer |
//! |---|---|
//! | over `health.maxMessageBytes` | `-32600` "message too large", with the request's `id` when it can be read from the line's start |
//! | not JSON | `-32700` parse error (`id` null), naming where the JSON breaks |
//! | a JSON array (a batch) | `-32600`: MCP has no batches since 2025-06-18 |
//! | a request whose `params` do not fit its method | `-32602`, with its `id` and what does not fit (the handler's answer: rmcp reads it as a custom request) |
//! | any other JSON that is no JSON-RPC message | `-32600`, with its `id` when it has one |
//! | a malformed notification | nothing (a notification has no answer), logged at debug |
//!
//! The connection stays open in every case: one bad message costs that message only. Lines
//! are read without ever buffering more than the limit. Stdout carries nothing but messages
//! (the log goes to stderr).

use std::sync::Arc;

use rmcp::model::{ErrorCode, ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleServer;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// How much of an oversized line is kept to find its `id`.
const HEAD: usize = 4096;

/// A stdio server transport that answers bad input (see the module docs).
pub(crate) struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// The start of a line being dropped for its size, until its newline.
    head: Vec<u8>,
    discarding: bool,
    max: usize,
    write: Arc<Mutex<Option<W>>>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StdioTransport<R, W> {
    /// Reads messages of at most `max` bytes from `read`, writes to `write`.
    pub(crate) fn new(read: R, write: W, max: usize) -> Self {
        Self {
            read: BufReader::with_capacity(64 * 1024, read),
            line: Vec::new(),
            head: Vec::new(),
            discarding: false,
            max,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }
}

/// One line read, or why not.
enum Line {
    Complete,
    Oversized,
    Eof,
}

impl<R: AsyncRead + Unpin + Send, W: AsyncWrite + Unpin + Send> StdioTransport<R, W> {
    /// Reads one line into `self.line`, never holding more than `max` bytes of it; cancel-safe
    /// (a partial line stays in the buffers for the next call).
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                if self.discarding {
                    self.discarding = false;
                    return Ok(Line::Oversized);
                }
                return Ok(Line::Eof);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if self.discarding || self.line.len() + chunk.len() > self.max + 1 {
                if !self.discarding {
                    self.discarding = true;
                    self.head.clear();
                    let keep = self.line.len().min(HEAD);
                    self.head.extend_from_slice(&self.line[..keep]);
                    self.line.clear();
                }
                let room = HEAD.saturating_sub(self.head.len());
                self.head.extend_from_slice(&chunk[..chunk.len().min(room)]);
                self.read.consume(take);
                if newline.is_some() {
                    self.discarding = false;
                    return Ok(Line::Oversized);
                }
                continue;
            }
            self.line.extend_from_slice(chunk);
            self.read.consume(take);
            if newline.is_some() {
                return Ok(Line::Complete);
            }
        }
    }
}

/// Writes an error answer at once (in order with everything else written).
///
/// The write runs in a task of its own: rmcp drops a pending `receive` whenever something else
/// is ready first, and the line this answers has been consumed already, so a write done
/// inside `receive` could be lost half-way (the host's request would then wait for its own
/// timeout). The task acquires the writer's lock (tokio's is first-come, first-served) and
/// finishes even if `receive` is dropped meanwhile.
async fn answer<W: AsyncWrite + Unpin + Send + 'static>(
    out: Arc<Mutex<Option<W>>>,
    code: ErrorCode,
    message: String,
    id: Option<RequestId>,
) -> bool {
    let msg: TxJsonRpcMessage<RoleServer> =
        TxJsonRpcMessage::<RoleServer>::error(ErrorData::new(code, message, None), id);
    let task = tokio::spawn(async move { write(&out, &msg).await.is_ok() });
    task.await.unwrap_or(false)
}

async fn write<W: AsyncWrite + Unpin, T: serde::Serialize>(
    out: &Mutex<Option<W>>,
    msg: &T,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    let mut guard = out.lock().await;
    let Some(w) = guard.as_mut() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "stdout is closed",
        ));
    };
    w.write_all(&bytes).await?;
    w.flush().await
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = Arc::clone(&self.write);
        async move { write(&out, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.read_line().await {
                Ok(Line::Eof) => return None,
                Ok(line) => line,
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    return None;
                }
            };
            if let Line::Oversized = line {
                let id = sniff_id(&self.head);
                self.head.clear();
                tracing::warn!(
                    limit = self.max,
                    "a message over {} bytes from the host was refused",
                    self.max
                );
                let message = format!(
                    "message too large: over {} bytes (the gateway's `health.maxMessageBytes`); \
                     it was not processed",
                    self.max
                );
                if !answer(
                    Arc::clone(&self.write),
                    ErrorCode::INVALID_REQUEST,
                    message,
                    id,
                )
                .await
                {
                    return None;
                }
                continue;
            }
            let mut bytes = std::mem::take(&mut self.line);
            while matches!(bytes.last(), Some(b'\n' | b'\r')) {
                bytes.pop();
            }
            let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
            if text.iter().all(|b| b.is_ascii_whitespace()) {
                self.line = bytes;
                self.line.clear();
                continue;
            }
            let parsed = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text);
            let reply = match parsed {
                Ok(msg) => {
                    self.line = bytes;
                    self.line.clear();
                    return Some(msg);
                }
                Err(e) => classify(text, &e),
            };
            self.line = bytes;
            self.line.clear();
            if let Some((code, message, id)) = reply {
                if !answer(Arc::clone(&self.write), code, message, id).await {
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut guard = self.write.lock().await;
        if let Some(mut w) = guard.take() {
            let _ = w.flush().await;
        }
        Ok(())
    }
}

/// The answer to a line that is no message (`None`: a notification, answered by nothing).
fn classify(
    text: &[u8],
    error: &serde_json::Error,
) -> Option<(ErrorCode, String, Option<RequestId>)> {
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            return Some((
                ErrorCode::PARSE_ERROR,
                format!(
                    "parse error: the line is not JSON ({e}); send one JSON-RPC message per line"
                ),
                None,
            ))
        }
    };
    let Value::Object(obj) = &value else {
        let what = if value.is_array() {
            "a JSON array: MCP has no JSON-RPC batches (since 2025-06-18); send one message per line".to_owned()
        } else {
            "not a JSON-RPC message: a message is a JSON object".to_owned()
        };
        return Some((
            ErrorCode::INVALID_REQUEST,
            format!("invalid request: {what}"),
            None,
        ));
    };
    let id = obj
        .get("id")
        .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
    let method = obj.get("method").and_then(Value::as_str);
    let detail = crate::names::printable(&error.to_string(), 300);
    match (method, &id) {
        (Some(method), None) if !obj.contains_key("id") => {
            tracing::debug!(
                "ignored a malformed notification `{}`: {detail}",
                crate::names::printable(method, 80)
            );
            None
        }
        _ if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") => Some((
            ErrorCode::INVALID_REQUEST,
            "invalid request: `jsonrpc` must be \"2.0\"".to_owned(),
            id,
        )),
        (Some(method), Some(_)) => Some((
            ErrorCode::INVALID_PARAMS,
            format!(
                "invalid params for `{}`: {detail}",
                crate::names::printable(method, 80)
            ),
            id,
        )),
        _ => Some((
            ErrorCode::INVALID_REQUEST,
            format!("invalid request: not a JSON-RPC message ({detail})"),
            id,
        )),
    }
}

/// The top-level `id` of a message from the start of its text, when it is there (the rest of
/// the line was never kept).
fn sniff_id(head: &[u8]) -> Option<RequestId> {
    let mut depth = 0usize;
    let mut i = 0;
    let b = head;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if i >= b.len() {
                    return None;
                }
                let is_id_key = depth == 1 && &b[start..=i] == b"\"id\"";
                i += 1;
                if is_id_key {
                    while i < b.len() && b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    if b.get(i) != Some(&b':') {
                        continue;
                    }
                    i += 1;
                    while i < b.len() && b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    let rest = &b[i..];
                    let end = if rest.first() == Some(&b'"') {
                        rest.iter()
                            .skip(1)
                            .position(|&c| c == b'"')
                            .map(|p| p + 2)?
                    } else {
                        rest.iter()
                            .position(|&c| !(c.is_ascii_digit() || c == b'-'))
                            .unwrap_or(rest.len())
                    };
                    return serde_json::from_slice(&rest[..end]).ok();
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_an_oversized_request_is_read_from_its_start() {
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"id":7,"arguments":{"x":"aaaa"#),
            Some(RequestId::Number(42))
        );
        assert_eq!(
            sniff_id(br#"{"method":"tools/call","params":{"id":7},"id":"abc","jsonrpc":"2.0"#),
            Some(RequestId::String("abc".into()))
        );
        assert_eq!(
            sniff_id(br#"{"method":"tools/call","params":{"id":7,"x":"aaaa"#),
            None
        );
        assert_eq!(sniff_id(b"garbage"), None);
    }

    #[test]
    fn what_is_not_a_message_gets_the_right_code() {
        let check = |text: &str| {
            let err = serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text).unwrap_err();
            classify(text.as_bytes(), &err)
        };
        let (code, msg, id) = check("{not json").unwrap();
        assert_eq!((code, id), (ErrorCode::PARSE_ERROR, None));
        assert!(msg.contains("not JSON"), "{msg}");
        let (code, msg, _) = check("[1,2]").unwrap();
        assert_eq!(code, ErrorCode::INVALID_REQUEST);
        assert!(msg.contains("batches"), "{msg}");
        // A known method with params that do not fit reads as rmcp's custom request: the
        // handler answers it (`-32602`, `server/mod.rs`).
        assert!(serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#
        )
        .is_ok());
        let (code, _, id) = check(r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap();
        assert_eq!(
            (code, id),
            (ErrorCode::INVALID_REQUEST, Some(RequestId::Number(4)))
        );
        assert!(
            check(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#).is_none()
        );
    }
}
