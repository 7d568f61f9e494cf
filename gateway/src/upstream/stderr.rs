//! A stdio upstream's stderr: every line to the log at DEBUG (target
//! `tool_health_gateway::upstream`), and the last lines kept, so that a server that exits says
//! why in `last_error` and in one WARN line, instead of a traceback spread over 45 INFO lines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest line of an upstream's stderr forwarded to the log (the rest of it is cut).
const MAX_STDERR_LINE: usize = 8 * 1024;

/// How many of the last lines are kept.
const TAIL_LINES: usize = 12;

/// The longest line kept in the tail (in characters).
const TAIL_LINE_CHARS: usize = 300;

/// The last lines an upstream wrote on stderr.
#[derive(Debug, Clone, Default)]
pub(super) struct Tail {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl Tail {
    fn push(&self, line: &str) {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        let mut kept: String = line.chars().take(TAIL_LINE_CHARS).collect();
        if kept.len() < line.len() {
            kept.push('…');
        }
        lines.push_back(kept);
    }

    /// The last `n` lines that say something (blank ones left out), oldest first.
    pub(super) fn last(&self, n: usize) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        let said: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
        said[said.len().saturating_sub(n)..]
            .iter()
            .map(|l| (*l).clone())
            .collect()
    }
}

/// Forwards a server's stderr to the log, line by line (each cut to [`MAX_STDERR_LINE`]
/// bytes, control characters replaced), keeping the last ones in `tail`, until it closes.
pub(super) async fn forward(mut stderr: impl AsyncRead + Unpin, server: Arc<str>, tail: Tail) {
    let mut buf = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                emit(&server, &line, cut, &tail);
                line.clear();
                cut = false;
            } else if line.len() < MAX_STDERR_LINE {
                line.push(b);
            } else {
                cut = true;
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &line, cut, &tail);
    }
}

fn emit(server: &str, line: &[u8], cut: bool, tail: &Tail) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    let text: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect();
    tail.push(&text);
    tracing::debug!(target: "tool_health_gateway::upstream", server, "{text}{}", if cut { "…" } else { "" });
}
