//! Everything logged on this thread, captured as text: the fleet's task runs on the test's
//! current-thread runtime, so a thread-local subscriber hears it (and fred's tasks) and nothing
//! from other tests.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::subscriber::DefaultGuard;
use tracing_subscriber::fmt::MakeWriter;

/// The log of one test (or one case), as the fmt layer wrote it.
pub(crate) struct Logs {
    buf: Arc<Mutex<Vec<u8>>>,
    _guard: DefaultGuard,
}

#[derive(Clone)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Buf {
    type Writer = Buf;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl Logs {
    /// Captures every event and span of every target, at every level, on this thread until
    /// dropped.
    pub(crate) fn capture() -> Logs {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::fmt()
            .with_writer(Buf(Arc::clone(&buf)))
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
            .finish();
        Logs {
            buf,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }

    /// The WARN lines of the fleet's target that contain `needle`.
    pub(crate) fn fleet_warnings(&self, needle: &str) -> usize {
        self.text()
            .lines()
            .filter(|l| l.contains(" WARN ") && l.contains(tool_health::fleet::LOG_TARGET))
            .filter(|l| l.contains(needle))
            .count()
    }
}
