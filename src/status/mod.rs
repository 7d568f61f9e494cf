//! A live status page to mount in your service (feature `status`): every tool's state, score
//! and recent history at a glance, the tools as JSON, and a stream of what changes.
//!
//! [`router`] gives a read-only [axum] `Router`; [`builder`] adds operator controls behind a
//! token and, with feature `prometheus`, the Prometheus endpoint:
//!
//! | route | serves |
//! |---|---|
//! | `GET /` | the page: one self-contained HTML document (no CDN, no build step, works offline) |
//! | `GET /tools` | the tools as JSON: a page of the tool list (`?filter=&state=&sort=&offset=&limit=`, see [`ToolsQuery`]) |
//! | `GET /tools/{tool}` | one tool's object (404 for a tool not tracked) |
//! | `GET /events` | server-sent events: transitions as they happen, snapshots every second (`events.rs`) |
//! | `POST /tools/{tool}/{force-open,force-closed,release,reset}` | only with a control token ([`StatusBuilder::control_token`]) |
//! | `GET /metrics` | only with [`StatusBuilder::prometheus`] (feature `prometheus`) |
//!
//! Every route is behind an [`HttpGuard`] (default: loopback `Host`
//! names only, no `Origin` but the page's own; [`StatusBuilder::guard`] to serve it under
//! another name), so that no other site's page can read it or act on it. At most
//! [`StatusBuilder::max_event_streams`] event streams are served at once (each builds a
//! snapshot every interval); one more is answered `503` with `Retry-After`.
//!
//! ```no_run
//! # async fn serve() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use tool_health::ToolHealthRegistry;
//!
//! let registry = Arc::new(ToolHealthRegistry::new());
//! let app = tool_health::status::router(Arc::clone(&registry));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! `docs/status.md` is the guide: the page, every JSON field (the gateway's `GET /v1/tools`
//! serves the same shape), the events, the controls, Prometheus names, dashboards and alerts.
//!
//! # What it costs the calls
//!
//! Nothing on the gate or record paths: transitions reach the page through a
//! transition-only observer (the record path stays exactly as without observers), which hands
//! each transition to a bounded channel and never waits for a client; the rest is read when a
//! request or the once-a-second sample asks (the exporters' allocation-free visit of the
//! tools). A slow client is lagged (told how many transitions it missed, then sent a fresh
//! snapshot), never waited for.
//!
//! The router's background task (history samples, transition log) starts with the first
//! request, or at [`StatusBuilder::build`] when called inside a tokio runtime, and ends once
//! every clone of the router is dropped.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::registry::ToolHealthRegistry;
use crate::web::HttpGuard;

mod control;
mod events;
mod groups;
mod history;
mod json;
mod page;
#[cfg(feature = "prometheus")]
mod prometheus;
pub(crate) mod snapshot;

pub use control::{
    ControlToken, DEFAULT_FORCE_OPEN_SECS, MAX_FORCE_OPEN_SECS, MAX_TOKEN_LEN, MIN_TOKEN_LEN,
};
pub use groups::{Group, GroupSource};
#[cfg(feature = "prometheus")]
pub use prometheus::{PrometheusError, PrometheusMetrics};
pub use snapshot::{
    untracked_tool_json, QueryError, Sort, StateFilter, ToolsQuery, DEFAULT_LIMIT, MAX_FILTER_LEN,
    MAX_LIMIT, SHAPE_VERSION,
};

use control::Action;
use events::Broadcaster;
use history::{History, TransitionRecord};
use snapshot::Meta;

/// The longest tool name a route accepts, in bytes (longer: 400).
pub const MAX_TOOL_NAME_LEN: usize = 1024;

/// A read-only status router for `registry` (the defaults of [`builder`]).
///
/// Each router (each [`StatusBuilder::build`]) registers one transition observer on the
/// registry, and observers cannot be removed: build it once and clone it (clones share
/// everything); an observer whose router is gone costs a transition one load.
pub fn router(registry: Arc<ToolHealthRegistry>) -> Router {
    Status::new(StatusBuilder::new(registry)).router()
}

/// A builder for a status router with controls, Prometheus or other intervals.
pub fn builder(registry: Arc<ToolHealthRegistry>) -> StatusBuilder {
    StatusBuilder::new(registry)
}

/// Configures a status router: see [`builder`]. Every setting is checked by
/// [`build`](Self::build), which names the field and its range.
#[must_use]
pub struct StatusBuilder {
    registry: Arc<ToolHealthRegistry>,
    token: Option<String>,
    snapshot_interval: Duration,
    sample_interval: Duration,
    history_len: usize,
    event_buffer: usize,
    max_event_streams: usize,
    guard: HttpGuard,
    groups: Option<GroupsSource>,
    #[cfg(feature = "prometheus")]
    prometheus: Option<PrometheusMetrics>,
}

/// Where the groups come from, and what a group is called.
#[derive(Clone)]
struct GroupsSource {
    noun: &'static str,
    source: Arc<dyn GroupSource>,
}

impl fmt::Debug for GroupsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupsSource")
            .field("noun", &self.noun)
            .finish_non_exhaustive()
    }
}

impl GroupsSource {
    fn now(&self) -> groups::Groups {
        groups::Groups {
            noun: self.noun,
            list: self.source.groups(),
        }
    }
}

impl fmt::Debug for StatusBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusBuilder")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("snapshot_interval", &self.snapshot_interval)
            .field("sample_interval", &self.sample_interval)
            .field("history_len", &self.history_len)
            .field("event_buffer", &self.event_buffer)
            .field("max_event_streams", &self.max_event_streams)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

/// The default of [`StatusBuilder::snapshot_interval`] and [`StatusBuilder::sample_interval`].
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest snapshot or sample interval accepted.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// The longest snapshot or sample interval accepted.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// The default of [`StatusBuilder::history_len`]: a minute at one sample a second.
pub const DEFAULT_HISTORY_LEN: usize = 60;
/// The default of [`StatusBuilder::event_buffer`].
pub const DEFAULT_EVENT_BUFFER: usize = 4096;
/// The default of [`StatusBuilder::max_event_streams`].
pub const DEFAULT_MAX_EVENT_STREAMS: usize = 64;

impl StatusBuilder {
    fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        Self {
            registry,
            token: None,
            snapshot_interval: DEFAULT_INTERVAL,
            sample_interval: DEFAULT_INTERVAL,
            history_len: DEFAULT_HISTORY_LEN,
            event_buffer: DEFAULT_EVENT_BUFFER,
            max_event_streams: DEFAULT_MAX_EVENT_STREAMS,
            guard: HttpGuard::loopback(),
            groups: None,
            #[cfg(feature = "prometheus")]
            prometheus: None,
        }
    }

    /// Shows groups of tools beside them — what tools are reached through, when that can
    /// refuse all of its tools at once: a gateway's MCP servers (`noun` = `"server"`). Each
    /// document asks `source` for the groups; the page lists them (state, connected,
    /// restarts, last error), and a tool its group refuses is shown and counted as refused
    /// (`available: false`, `refused_by` = `noun`), whatever its own breaker says.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tool_health::status::Group;
    /// use tool_health::ToolHealthRegistry;
    ///
    /// let registry = Arc::new(ToolHealthRegistry::new());
    /// let status = tool_health::status::builder(registry)
    ///     .groups("server", || vec![Group::new("github", "github/").connected(true)])
    ///     .build()
    ///     .unwrap();
    /// # let _ = status;
    /// ```
    pub fn groups(mut self, noun: &'static str, source: impl GroupSource) -> Self {
        self.groups = Some(GroupsSource {
            noun,
            source: Arc::new(source),
        });
        self
    }

    /// Turns the operator controls on, behind this token ([`MIN_TOKEN_LEN`] to
    /// [`MAX_TOKEN_LEN`] bytes of visible ASCII): requests carry it as
    /// `Authorization: Bearer <token>`, and the page shows the controls and asks for it. Read
    /// it from a secret store or a file, not from the command line (other users of the host
    /// can read process arguments).
    pub fn control_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How often the event stream sends a snapshot ([`MIN_INTERVAL`] to [`MAX_INTERVAL`];
    /// default 1 s). A transition brings the next one forward to 100 ms after it.
    pub fn snapshot_interval(mut self, interval: Duration) -> Self {
        self.snapshot_interval = interval;
        self
    }

    /// How often every tool's score and counts are sampled for the sparkline and the rates
    /// ([`MIN_INTERVAL`] to [`MAX_INTERVAL`]; default 1 s).
    pub fn sample_interval(mut self, interval: Duration) -> Self {
        self.sample_interval = interval;
        self
    }

    /// How many samples each tool's sparkline keeps (2 to 600; default 60).
    pub fn history_len(mut self, samples: usize) -> Self {
        self.history_len = samples;
        self
    }

    /// How many transitions the channel to the event streams holds (16 to 65,536; default
    /// 4,096): a client further behind is lagged.
    pub fn event_buffer(mut self, events: usize) -> Self {
        self.event_buffer = events;
        self
    }

    /// How many `GET /events` streams are served at once (1 to 10,000; default 64): each
    /// builds a snapshot of the tools every [`snapshot_interval`](Self::snapshot_interval).
    /// One more is answered `503` with `Retry-After` (a browser's `EventSource` retries).
    pub fn max_event_streams(mut self, streams: usize) -> Self {
        self.max_event_streams = streams;
        self
    }

    /// Who may call the router (default [`HttpGuard::loopback`]: the loopback names, no other
    /// site's page): give it the names the page is reached by when it is served beyond
    /// loopback or behind a proxy.
    pub fn guard(mut self, guard: HttpGuard) -> Self {
        self.guard = guard;
        self
    }

    /// Serves `GET /metrics` from this Prometheus exporter (feature `prometheus`).
    #[cfg(feature = "prometheus")]
    pub fn prometheus(mut self, metrics: PrometheusMetrics) -> Self {
        self.prometheus = Some(metrics);
        self
    }

    /// Checks the settings and builds the status service (its [`Status::router`] is what to
    /// mount).
    pub fn build(self) -> Result<Status, StatusError> {
        let err = |field: &'static str, message: String| Err(StatusError { field, message });
        for (field, d) in [
            ("snapshot_interval", self.snapshot_interval),
            ("sample_interval", self.sample_interval),
        ] {
            if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&d) {
                return err(field, format!("must be from 100 ms to 60 s, got {d:?}"));
            }
        }
        if !(2..=600).contains(&self.history_len) {
            return err(
                "history_len",
                format!("must be from 2 to 600 samples, got {}", self.history_len),
            );
        }
        if !(16..=65_536).contains(&self.event_buffer) {
            return err(
                "event_buffer",
                format!("must be from 16 to 65536 events, got {}", self.event_buffer),
            );
        }
        if !(1..=10_000).contains(&self.max_event_streams) {
            return err(
                "max_event_streams",
                format!(
                    "must be from 1 to 10000 streams, got {}",
                    self.max_event_streams
                ),
            );
        }
        if let Some(t) = &self.token {
            if let Err(message) = ControlToken::new(t.clone()) {
                return err("control_token", message);
            }
        }
        Ok(Status::new(self))
    }
}

/// A setting [`StatusBuilder::build`] refused: the field and what it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusError {
    /// The builder method's name.
    pub field: &'static str,
    /// What was wrong, with the accepted range.
    pub message: String,
}

impl fmt::Display for StatusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status: `{}` {}", self.field, self.message)
    }
}

impl std::error::Error for StatusError {}

/// What the routes share.
#[derive(Debug)]
struct Shared {
    registry: Arc<ToolHealthRegistry>,
    history: History,
    sender: broadcast::Sender<Arc<TransitionRecord>>,
    /// The status task's receiver until the task starts (subscribed at build, so that the
    /// transitions before the first request reach the log).
    task_receiver: Mutex<Option<broadcast::Receiver<Arc<TransitionRecord>>>>,
    task_started: AtomicBool,
    token: Option<ControlToken>,
    snapshot_interval: Duration,
    sample_interval: Duration,
    /// One permit per event stream being served.
    event_streams: Arc<tokio::sync::Semaphore>,
    guard: HttpGuard,
    groups: Option<GroupsSource>,
    #[cfg(feature = "prometheus")]
    prometheus: Option<PrometheusMetrics>,
}

impl Shared {
    /// What a document needs besides the tools, the groups as they are now.
    fn meta(&self) -> Meta {
        Meta {
            controls: self.token.is_some(),
            sample_interval: self.sample_interval,
            groups: self
                .groups
                .as_ref()
                .map(GroupsSource::now)
                .unwrap_or_default(),
        }
    }

    /// Starts the status task once, if a tokio runtime is at hand.
    fn start_task(self: &Arc<Self>) {
        if self.task_started.load(Ordering::Acquire) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.task_started.swap(true, Ordering::AcqRel) {
            return;
        }
        let receiver = self
            .task_receiver
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(receiver) = receiver {
            handle.spawn(run_task(
                Arc::downgrade(self),
                receiver,
                self.sample_interval,
            ));
        }
    }
}

/// The status task: samples the history every interval and keeps the transition log, until
/// the routers are gone.
async fn run_task(
    shared: Weak<Shared>,
    mut receiver: broadcast::Receiver<Arc<TransitionRecord>>,
    interval: Duration,
) {
    // The first sample one interval from now (a sample at start would find nothing new).
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let Some(s) = shared.upgrade() else { return };
                s.history.sample(&s.registry);
            }
            received = receiver.recv() => match received {
                Ok(record) => {
                    let Some(s) = shared.upgrade() else { return };
                    s.history.record_transition(TransitionRecord::clone(&record));
                }
                // The log is a view: what was missed is missed (the page's log says the same).
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// A built status service: its [`router`](Self::router) to mount, and the same documents for
/// other routes (the gateway's `GET /v1/tools`). Clones share everything.
#[derive(Debug, Clone)]
pub struct Status {
    shared: Arc<Shared>,
}

impl Status {
    fn new(b: StatusBuilder) -> Self {
        let (sender, task_receiver) = broadcast::channel(b.event_buffer);
        b.registry.add_transition_observer(Arc::new(Broadcaster {
            sender: sender.clone(),
        }));
        let shared = Arc::new(Shared {
            history: History::new(b.history_len),
            sender,
            task_receiver: Mutex::new(Some(task_receiver)),
            task_started: AtomicBool::new(false),
            // Checked by `build`; `router` has none.
            token: b.token.and_then(|t| ControlToken::new(t).ok()),
            snapshot_interval: b.snapshot_interval,
            sample_interval: b.sample_interval,
            event_streams: Arc::new(tokio::sync::Semaphore::new(b.max_event_streams)),
            guard: b.guard,
            groups: b.groups,
            #[cfg(feature = "prometheus")]
            prometheus: b.prometheus,
            registry: b.registry,
        });
        shared.start_task();
        Self { shared }
    }

    /// The router to mount (`Router::nest` it under a prefix if you like: the page finds its
    /// routes relative to its own address).
    pub fn router(&self) -> Router {
        let mut router = Router::new()
            .route("/", get(page_route))
            .route("/tools", get(tools_route))
            .route("/tools/{tool}", get(tool_route))
            .route("/events", get(events_route));
        if self.shared.token.is_some() {
            router = router.route("/tools/{tool}/{action}", post(control_route));
        }
        #[cfg(feature = "prometheus")]
        if self.shared.prometheus.is_some() {
            router = router.route("/metrics", get(prometheus::metrics_route));
        }
        self.shared
            .guard
            .apply(router.with_state(Arc::clone(&self.shared)))
    }

    /// The `GET /tools` document for `query`.
    pub fn tools_json(&self, query: &ToolsQuery) -> String {
        let s = &self.shared;
        snapshot::tools_json(&s.registry, &s.history, query, s.meta())
    }

    /// The `GET /tools/{tool}` document; `None` for a tool not tracked.
    pub fn tool_json(&self, tool: &str) -> Option<String> {
        let s = &self.shared;
        snapshot::tool_json(&s.registry, &s.history, tool, &s.meta())
    }

    /// Takes one history sample now (the status task takes one every sample interval; call
    /// it yourself to drive the history with a [`ManualClock`](crate::ManualClock)).
    pub fn sample(&self) {
        self.shared.history.sample(&self.shared.registry);
    }
}

type SharedState = State<Arc<Shared>>;

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

fn error_response(status: StatusCode, message: &str) -> Response {
    let mut body = String::from("{\"error\":");
    json::string(&mut body, message);
    body.push('}');
    json_response(status, body)
}

fn parse_query(uri: &Uri) -> Result<ToolsQuery, QueryError> {
    ToolsQuery::parse(uri.query().unwrap_or(""))
}

fn query_error(e: &QueryError) -> Response {
    error_response(StatusCode::BAD_REQUEST, &e.to_string())
}

/// The 400 for a tool name longer than [`MAX_TOOL_NAME_LEN`], if it is.
fn tool_name_error(tool: &str) -> Option<Response> {
    (tool.len() > MAX_TOOL_NAME_LEN).then(|| {
        error_response(
            StatusCode::BAD_REQUEST,
            &format!("tool name: at most {MAX_TOOL_NAME_LEN} bytes"),
        )
    })
}

async fn page_route(State(shared): SharedState) -> Response {
    shared.start_task();
    page::response()
}

async fn tools_route(State(shared): SharedState, uri: Uri) -> Response {
    shared.start_task();
    match parse_query(&uri) {
        Ok(q) => json_response(
            StatusCode::OK,
            snapshot::tools_json(&shared.registry, &shared.history, &q, shared.meta()),
        ),
        Err(e) => query_error(&e),
    }
}

async fn tool_route(State(shared): SharedState, Path(tool): Path<String>) -> Response {
    shared.start_task();
    if let Some(r) = tool_name_error(&tool) {
        return r;
    }
    match snapshot::tool_json(&shared.registry, &shared.history, &tool, &shared.meta()) {
        Some(body) => json_response(StatusCode::OK, body),
        None => error_response(StatusCode::NOT_FOUND, "no such tool tracked"),
    }
}

async fn events_route(State(shared): SharedState, uri: Uri) -> Response {
    shared.start_task();
    let query = match parse_query(&uri) {
        Ok(q) => q,
        Err(e) => return query_error(&e),
    };
    let Ok(permit) = Arc::clone(&shared.event_streams).try_acquire_owned() else {
        let mut r = error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many event streams open: retry later",
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return r;
    };
    events::response(&shared, query, permit).into_response()
}

async fn control_route(
    State(shared): SharedState,
    Path((tool, action)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let Some(token) = &shared.token else {
        return error_response(StatusCode::NOT_FOUND, "controls are off");
    };
    if !token.authorizes(&headers) {
        let mut r = error_response(
            StatusCode::UNAUTHORIZED,
            "controls need `Authorization: Bearer <token>`",
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    if let Some(r) = tool_name_error(&tool) {
        return r;
    }
    let action = match Action::parse(&action, uri.query()) {
        Ok(a) => a,
        Err((status, message)) => return error_response(status, &message),
    };
    if !shared.registry.is_tracked(&tool) {
        return error_response(StatusCode::NOT_FOUND, "no such tool tracked");
    }
    action.apply(&shared.registry, &tool);
    match snapshot::tool_json(&shared.registry, &shared.history, &tool, &shared.meta()) {
        Some(body) => json_response(StatusCode::OK, body),
        None => error_response(StatusCode::NOT_FOUND, "no such tool tracked"),
    }
}
