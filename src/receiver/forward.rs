//! Forwarding to the next OTLP/HTTP endpoint: every request received, byte for byte, in the
//! order received, through a queue bounded in bytes.
//!
//! A request is only taken in when the queue has room for it ([`Forwarder::reserve`]); when it
//! has none the receiver answers with back-pressure, so the exporter keeps the batch and
//! retries — nothing received is dropped silently. Two workers send: a `2xx` is done; `429`,
//! `502`, `503`, `504` and connection errors are retried with backoff (the endpoint's
//! `Retry-After` honoured, up to [`RETRY_CAP`] a wait) for up to [`GIVE_UP_AFTER`]; any other
//! answer, or the end of retries, gives the request up (counted, logged at WARN).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use super::{Counters, Inner, ReceiverError};

/// The longest wait between two tries of one request.
const RETRY_CAP: Duration = Duration::from_secs(10);
/// How long one request is retried before it is given up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);
/// How many requests are sent at once.
const WORKERS: usize = 2;

/// Where to forward, as the builder collected it.
#[derive(Debug, Clone, Default)]
pub(super) struct Config {
    pub(super) url: String,
    pub(super) headers: Vec<(String, String)>,
}

/// One request waiting to be sent, holding its room in the queue.
struct Job {
    body: Bytes,
    content_type: &'static str,
    encoding: Option<&'static str>,
    _room: OwnedSemaphorePermit,
}

/// Room reserved in the queue for one request.
#[derive(Debug)]
pub(super) struct Reservation(OwnedSemaphorePermit);

/// The forwarding queue and its workers.
pub(super) struct Forwarder {
    url: reqwest::Url,
    client: reqwest::Client,
    headers: HeaderMap,
    room: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<Job>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Job>>>,
    /// The wait the next endpoint last asked for (or the backoff in force), for our own
    /// `Retry-After` while the queue is full.
    backoff: Mutex<Duration>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("url", &self.url.as_str())
            .field("room", &self.room.available_permits())
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    pub(super) fn new(config: Config, queue_bytes: usize) -> Result<Self, ReceiverError> {
        let bad_url = |reason: &str| ReceiverError::ForwardUrl {
            url: config.url.clone(),
            reason: reason.to_owned(),
        };
        let url = reqwest::Url::parse(&config.url).map_err(|e| bad_url(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad_url("the scheme must be http or https"));
        }
        // reqwest's client needs a rustls crypto provider even for plain http (it builds its
        // TLS configuration up front, and panics without one).
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            if !crate::cpu::pure_rust_tls_supported() {
                return Err(ReceiverError::TlsProviderUnsupported);
            }
            // Another thread's provider installed meanwhile wins.
            let _ = rustls_graviola::default_provider().install_default();
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let bad = || ReceiverError::ForwardHeader { name: name.clone() };
            headers.insert(
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
                HeaderValue::from_str(value).map_err(|_| bad())?,
            );
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| bad_url(&e.to_string()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(Self {
            url,
            client,
            headers,
            room: Arc::new(Semaphore::new(queue_bytes)),
            tx,
            rx: Mutex::new(Some(rx)),
            backoff: Mutex::new(Duration::from_secs(1)),
        })
    }

    /// Room for a request of `len` bytes, if the queue has it.
    pub(super) fn reserve(&self, len: usize) -> Option<Reservation> {
        let n = u32::try_from(len.max(1)).ok()?;
        self.room
            .clone()
            .try_acquire_many_owned(n)
            .ok()
            .map(Reservation)
    }

    /// How long an exporter should wait while the queue is full.
    pub(super) fn retry_hint(&self) -> Duration {
        *self.backoff.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a request (its room reserved).
    pub(super) fn send(
        &self,
        room: Reservation,
        body: Bytes,
        content_type: &'static str,
        encoding: Option<&'static str>,
    ) {
        // The workers live as long as the receiver: a send fails only while it is dropped.
        let _ = self.tx.send(Job {
            body,
            content_type,
            encoding,
            _room: room.0,
        });
    }

    /// Starts the workers (once).
    pub(super) fn start(&self, runtime: &tokio::runtime::Handle, receiver: Weak<Inner>) {
        let Some(rx) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..WORKERS {
            let rx = rx.clone();
            let receiver = receiver.clone();
            runtime.spawn(async move {
                loop {
                    let job = { rx.lock().await.recv().await };
                    let Some(job) = job else {
                        return; // the receiver is gone
                    };
                    let Some(inner) = receiver.upgrade() else {
                        return;
                    };
                    let Some(f) = &inner.forward else {
                        return;
                    };
                    let ok = f.deliver(&job).await;
                    let c = &inner.counters;
                    Counters::add(if ok { &c.forwarded } else { &c.forward_failed }, 1);
                }
            });
        }
    }

    /// Sends one request, retrying what OTLP says is retryable. Whether it was accepted.
    async fn deliver(&self, job: &Job) -> bool {
        let started = Instant::now();
        let mut wait = Duration::from_millis(200);
        loop {
            let mut request = self
                .client
                .post(self.url.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, job.content_type)
                .body(job.body.clone());
            if let Some(e) = job.encoding {
                request = request.header(CONTENT_ENCODING, e);
            }
            let (retry, asked, what) = match request.send().await {
                Ok(r) if r.status().is_success() => {
                    *self.backoff.lock().unwrap_or_else(|p| p.into_inner()) =
                        Duration::from_secs(1);
                    return true;
                }
                Ok(r) => {
                    let status = r.status().as_u16();
                    let asked = r
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    (
                        matches!(status, 429 | 502 | 503 | 504),
                        asked,
                        format!("HTTP {status}"),
                    )
                }
                Err(e) => (true, None, e.to_string()),
            };
            let delay = asked.unwrap_or(wait).min(RETRY_CAP);
            *self.backoff.lock().unwrap_or_else(|p| p.into_inner()) =
                delay.max(Duration::from_secs(1));
            if !retry || started.elapsed() + delay > GIVE_UP_AFTER {
                tracing::warn!(
                    target: "tool_health::receiver",
                    endpoint = %self.url,
                    error = %what,
                    "forwarding a trace request failed; it was given up",
                );
                return false;
            }
            tokio::time::sleep(delay).await;
            wait = (wait * 2).min(RETRY_CAP);
        }
    }
}
