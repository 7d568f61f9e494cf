//! How many config reloads there were and how the last one went: what `GET /v1/servers` and
//! `/healthz` show. The reloader (`reload/`) records each one here; the assembled gateway
//! holds it.

use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    Hangup,
    File,
}

impl Trigger {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Hangup => "SIGHUP",
            Self::File => "the file changed",
        }
    }
}

/// How many reloads there were, and how the last one went (for the API).
#[derive(Debug, Default)]
pub(crate) struct Reloads {
    status: Mutex<Status>,
}

#[derive(Debug, Default)]
struct Status {
    applied: u64,
    refused: u64,
    last: Option<Value>,
}

impl Reloads {
    pub(crate) fn record(&self, trigger: Trigger, applied: bool, detail: (&str, Value)) {
        let mut s = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        if applied {
            s.applied += 1;
        } else {
            s.refused += 1;
        }
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut last = json!({
            "trigger": trigger.name(),
            "result": if applied { "applied" } else { "refused" },
            "at_unix_ms": at_ms,
        });
        last[detail.0] = detail.1;
        s.last = Some(last);
    }

    /// `{"applied": 2, "refused": 1, "last": {"trigger": "SIGHUP", "result": "applied",
    /// "at_unix_ms": …, "changes": "added `b`; 1 server unchanged"}}` (a refused one has
    /// `"problems"`, each `file:line: key message`, instead of `"changes"`); `last` is `null`
    /// before the first reload.
    pub(crate) fn document(&self) -> Value {
        let s = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        json!({"applied": s.applied, "refused": s.refused, "last": s.last})
    }
}
