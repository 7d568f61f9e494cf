//! Conventions as data: how one framework's tool spans look, as a small declarative
//! [`Convention`] instead of special cases in the layer.
//!
//! A convention says how its tool spans are **matched** (target crate, span name, declared
//! fields, or a predicate — all static metadata, so the match is decided once per callsite and
//! cached), where the **tool name** comes from (a field, or a field minus a prefix such as
//! `otel.name` = `tool.{name}`), which values say the span is **not** a tool call after all
//! (`gen_ai.operation.name` = `chat`), which fields carry an **error type**, which fields mean
//! **failure** when recorded, and which field carries the framework's own **outcome**
//! (`gen_ai.tool.call.outcome` = `success` / `error` / `denied` / `skipped`).
//!
//! Every convention also reads the fields of OpenTelemetry itself: `error.type`,
//! `otel.status_code`, `http.response.status_code` and the layer's retry-after field.
//!
//! The first convention whose match accepts a callsite decides how its spans are read. The
//! built-in set ([`Convention::builtin`]) puts the framework conventions, which match on their
//! crate's target and so can only claim that crate's spans, before the MCP and GenAI ones,
//! which match on fields from any source.

use std::borrow::Cow;
use std::fmt;

use tracing_core::{Level, Metadata};

use crate::infer::text::Text;
use crate::semconv;

type Str = Cow<'static, str>;

/// How many conventions a layer can tell apart (the callsite cache keeps the index in 7 bits);
/// conventions past it are never matched.
pub const MAX_CONVENTIONS: usize = 127;

/// The error type the other languages' caller errors read as (a caller error by default).
const INVALID_ARGUMENTS: &str = "invalid_arguments";

/// How many [`kind`](Convention::kind) checks a convention can hold; later ones are ignored.
const MAX_KINDS: usize = 8;

/// Where a tool name comes from: a field's value, minus a prefix when one is given (a value
/// without the prefix is no name).
#[derive(Debug, Clone, PartialEq, Eq)]
struct NameSource {
    field: Str,
    strip_prefix: Option<Str>,
}

/// How one framework's tool spans look: matched on static metadata, read through named fields.
///
/// ```
/// use tool_health::layer::Convention;
///
/// // Spans like `info_span!(target: "my_agent::tools", "tool_call", tool = %name, error = Empty)`,
/// // with `span.record("error", ..)` on failure:
/// let mine = Convention::new("my-agent")
///     .target("my_agent")
///     .span_name("tool_call")
///     .tool_name_field("tool")
///     .failure_field("error")
///     .no_completion_marker();
/// # let _ = mine;
/// ```
///
/// Add it with [`ToolHealthLayerBuilder::convention`](crate::layer::ToolHealthLayerBuilder::convention).
/// The built-in ones are constructors ([`genai`](Self::genai), [`mcp`](Self::mcp),
/// [`rig`](Self::rig), [`langchain_rust`](Self::langchain_rust), [`adk`](Self::adk),
/// [`swiftide`](Self::swiftide)); start from one to change it.
#[derive(Clone)]
pub struct Convention {
    name: Str,
    target: Option<Str>,
    span_name: Option<Str>,
    required_fields: Vec<Str>,
    filter: Option<fn(&Metadata<'_>) -> bool>,
    tool_name: Vec<NameSource>,
    kinds: Vec<(Str, Str)>,
    error_type_fields: Vec<Str>,
    failure_fields: Vec<Str>,
    outcome_field: Option<Str>,
    /// `(field, value, error type)`: recorded with that value, the call's error type.
    error_type_when: Vec<(Str, Str, Str)>,
    /// `(field, path)`: a JSON text whose string at `path` is the framework's verdict.
    outcome_in_json: Option<(Str, Vec<Str>)>,
    /// `(raw, error type)`: an error event's error type `raw` reads as the other.
    event_error_types: Vec<(Str, Str)>,
    completion_marker: bool,
    late_failure: Option<LateFailure>,
    sdk_only: bool,
    nests: bool,
}

/// How a framework reports a tool call's failure *after* the call's span: an event in the
/// span the tool span was created in (its parent), matched on its target, level and message.
///
/// ```
/// use tool_health::layer::{Convention, LateFailure};
/// use tracing::Level;
///
/// // `warn!(target: "my_agent", tool = %name, "tool failed")` in the agent's span, after the
/// // tool span:
/// let mine = Convention::new("my-agent")
///     .target("my_agent")
///     .span_name("tool")
///     .tool_name_field("tool")
///     .no_completion_marker()
///     .late_failure(
///         LateFailure::event("my_agent", Level::WARN)
///             .message("tool failed")
///             .tool_name_field("tool"),
///     );
/// # let _ = mine;
/// ```
///
/// See [`Convention::late_failure`] for how the outcome waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateFailure {
    pub(crate) target: Str,
    pub(crate) min_level: Level,
    pub(crate) messages: Vec<Str>,
    /// The field naming the tool, and the marker its value follows in that field's text
    /// (`None`: the whole value).
    pub(crate) tool_name: Option<(Str, Option<Str>)>,
}

impl LateFailure {
    /// An event from `target` (the crate, or a module inside it) at `min_level` or more severe.
    pub fn event(target: impl Into<Cow<'static, str>>, min_level: Level) -> Self {
        Self {
            target: target.into(),
            min_level,
            messages: Vec::new(),
            tool_name: None,
        }
    }

    /// The event's message starts with `prefix` (several: any of them). With none, any
    /// message counts.
    #[must_use]
    pub fn message(mut self, prefix: impl Into<Cow<'static, str>>) -> Self {
        self.messages.push(prefix.into());
        self
    }

    /// The field carrying the failed call's tool name. Without one, a verdict fails the oldest
    /// waiting call of the parent, whatever its tool.
    #[must_use]
    pub fn tool_name_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.tool_name = Some((field.into(), None));
        self
    }

    /// The tool name is inside `field`'s text, right after `marker` and up to the next `"`
    /// (swiftide's `tool_call = ?call`: `ToolCall { id: "…", name: "search", … }`, marker
    /// `name: "`).
    #[must_use]
    pub fn tool_name_in(
        mut self,
        field: impl Into<Cow<'static, str>>,
        marker: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.tool_name = Some((field.into(), Some(marker.into())));
        self
    }

    /// Whether an event from `target` at `level` can be one of these verdicts.
    pub(crate) fn may_match(&self, target: &str, level: Level) -> bool {
        level <= self.min_level && within(target, &self.target)
    }

    /// Whether `message` is one of the verdict messages.
    pub(crate) fn message_matches(&self, message: &str) -> bool {
        self.messages.is_empty() || self.messages.iter().any(|m| message.starts_with(&**m))
    }

    /// The tool name in `field` = `value`, if `field` is the tool-name field.
    pub(crate) fn tool_name_of<'v>(&self, field: &str, value: &'v str) -> Option<&'v str> {
        let (name_field, marker) = self.tool_name.as_ref()?;
        if name_field != field {
            return None;
        }
        match marker {
            None => Some(value),
            Some(marker) => {
                let rest = &value[value.find(&**marker)? + marker.len()..];
                Some(&rest[..rest.find('"')?])
            }
        }
    }
}

/// Whether `target` is `module` or inside it (`module::…`).
pub(crate) fn within(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

impl fmt::Debug for Convention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Convention")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("span_name", &self.span_name)
            .field("required_fields", &self.required_fields)
            .field("filter", &self.filter.is_some())
            .field("tool_name", &self.tool_name)
            .field("kinds", &self.kinds)
            .field("error_type_fields", &self.error_type_fields)
            .field("failure_fields", &self.failure_fields)
            .field("outcome_field", &self.outcome_field)
            .field("error_type_when", &self.error_type_when)
            .field("outcome_in_json", &self.outcome_in_json)
            .field("event_error_types", &self.event_error_types)
            .field("completion_marker", &self.completion_marker)
            .field("late_failure", &self.late_failure)
            .field("sdk_only", &self.sdk_only)
            .field("nests", &self.nests)
            .finish()
    }
}

impl Convention {
    /// An empty convention called `name`: it matches every span and finds no tool name until
    /// given a [tool-name field](Self::tool_name_field).
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self {
            name: name.into(),
            target: None,
            span_name: None,
            required_fields: Vec::new(),
            filter: None,
            tool_name: Vec::new(),
            kinds: Vec::new(),
            error_type_fields: Vec::new(),
            failure_fields: Vec::new(),
            outcome_field: None,
            error_type_when: Vec::new(),
            outcome_in_json: None,
            event_error_types: Vec::new(),
            completion_marker: true,
            late_failure: None,
            sdk_only: false,
            nests: false,
        }
    }

    /// The convention's name (a builder's [`convention`](crate::layer::ToolHealthLayerBuilder::convention)
    /// replaces the one of the same name).
    pub fn name(&self) -> &str {
        &self.name
    }

    // ----------------------------------------------------------------------------- matching

    /// Only spans whose target is `module` or inside it (`module::…`): a crate name such as
    /// `rig_agent` claims only that crate's spans, which makes the match unambiguous.
    #[must_use]
    pub fn target(mut self, module: impl Into<Cow<'static, str>>) -> Self {
        self.target = Some(module.into());
        self
    }

    /// Only spans with exactly this name (the static name; `otel.name` is a field).
    #[must_use]
    pub fn span_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.span_name = Some(name.into());
        self
    }

    /// Only spans that declare this field (with a value or `Empty`).
    #[must_use]
    pub fn requires_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.required_fields.push(field.into());
        self
    }

    /// Only spans whose metadata passes `filter` as well. Called once per callsite, possibly
    /// while tracing registers the callsite: it must be pure — no panics, no tracing events.
    #[must_use]
    pub fn filter(mut self, filter: fn(&Metadata<'_>) -> bool) -> Self {
        self.filter = Some(filter);
        self
    }

    // ----------------------------------------------------------------------------- reading

    /// A field carrying the tool name. Several sources are tried in the order given: a value
    /// from an earlier source wins over one from a later source. A span matches only if it
    /// declares at least one of them.
    #[must_use]
    pub fn tool_name_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.tool_name.push(NameSource {
            field: field.into(),
            strip_prefix: None,
        });
        self
    }

    /// A field whose value is the tool name after `prefix`, e.g. `otel.name` = `tool.search`
    /// with prefix `tool.`. A value without the prefix is no name.
    #[must_use]
    pub fn tool_name_from(
        mut self,
        field: impl Into<Cow<'static, str>>,
        prefix: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.tool_name.push(NameSource {
            field: field.into(),
            strip_prefix: Some(prefix.into()),
        });
        self
    }

    /// When `field` is recorded with anything but `value`, the span is not a tool call (e.g.
    /// `gen_ai.operation.name` must be `execute_tool`). Unrecorded, it decides nothing. At most
    /// eight such checks count.
    #[must_use]
    pub fn kind(
        mut self,
        field: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Self {
        if self.kinds.len() < MAX_KINDS {
            self.kinds.push((field.into(), value.into()));
        }
        self
    }

    /// A field carrying an error type, read like `error.type` (which every convention reads
    /// first): recorded non-empty, the call failed, and the value decides whether it is a
    /// caller error.
    #[must_use]
    pub fn error_type_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.error_type_fields.push(field.into());
        self
    }

    /// A field that, recorded non-empty, means the call failed (e.g. langchain-rust's `error`,
    /// the error's text).
    #[must_use]
    pub fn failure_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.failure_fields.push(field.into());
        self
    }

    /// A field carrying the framework's own verdict: `success`, `error` (a failure unless the
    /// error type is a caller error), `denied` or `skipped` (no call was made: nothing is
    /// recorded). Recorded, it is also a completion marker.
    #[must_use]
    pub fn outcome_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.outcome_field = Some(field.into());
        self
    }

    /// When `field` is recorded with exactly `value`, the call's error type is `error_type`
    /// (read like `error.type`): how a framework that marks a caller error in a field of its
    /// own is told apart — Pydantic AI's `pydantic_ai.tool.failure_stage` = `validation` is
    /// `invalid_arguments`, a caller error by default.
    #[must_use]
    pub fn error_type_when(
        mut self,
        field: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
        error_type: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.error_type_when
            .push((field.into(), value.into(), error_type.into()));
        self
    }

    /// `field` holds a JSON text whose string value at `path` (object keys, outermost first)
    /// is the framework's own verdict, read as an [outcome field](Self::outcome_field)'s:
    /// LangChain's tool message in OpenInference's `output.value`, whose `data.status` is
    /// `success` or `error` (a handled `ToolException` leaves the span's status OK and says
    /// `error` only there). Anything else there, or text that is not such JSON, decides
    /// nothing.
    #[must_use]
    pub fn outcome_in_json<I, S>(mut self, field: impl Into<Cow<'static, str>>, path: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Cow<'static, str>>,
    {
        self.outcome_in_json = Some((field.into(), path.into_iter().map(Into::into).collect()));
        self
    }

    /// An error event (an OpenTelemetry `exception` event's `exception.type`, an event's
    /// `error.type`) whose error type is exactly `raw` gives the call the error type
    /// `error_type` instead: LangChain's argument validation raises pydantic's
    /// `ValidationError`, read as `invalid_arguments` (a caller error by default).
    #[must_use]
    pub fn event_error_type(
        mut self,
        raw: impl Into<Cow<'static, str>>,
        error_type: impl Into<Cow<'static, str>>,
    ) -> Self {
        self.event_error_types.push((raw.into(), error_type.into()));
        self
    }

    /// The framework marks nothing on a successful call's span, so strict mode cannot tell a
    /// cancelled call from a success there: strict mode treats these spans as completed.
    #[must_use]
    pub fn no_completion_marker(mut self) -> Self {
        self.completion_marker = false;
        self
    }

    /// Whether this convention's spans carry a completion marker when they succeed.
    pub fn has_completion_marker(&self) -> bool {
        self.completion_marker
    }

    /// Whether a span or callsite with this metadata is one of this convention's tool-span
    /// candidates (its tool name may still be missing, or a [`kind`](Self::kind) field may
    /// still rule it out).
    pub fn matches(&self, meta: &Metadata<'_>) -> bool {
        if !meta.is_span() {
            return false;
        }
        let fields = meta.fields();
        self.matches_shape(meta.target(), Some(meta.name()), |f| {
            fields.field(f).is_some()
        }) && self.filter.is_none_or(|filter| filter(meta))
    }

    /// The match on a neutral description of a span: its `target` (a `tracing` target, or for
    /// an OpenTelemetry span the module path it came from, else its instrumentation scope),
    /// its static `name` (`None` for an OpenTelemetry span: its name may be `otel.name`'s value,
    /// and a convention's span name is then checked through its name source instead), and
    /// which fields it `declares`. A [`filter`](Self::filter) is not run here.
    pub(crate) fn matches_shape(
        &self,
        target: &str,
        name: Option<&str>,
        declares: impl Fn(&str) -> bool,
    ) -> bool {
        self.matches_target_and_name(target, name)
            && self.required_fields().all(&declares)
            && self.name_fields().any(declares)
    }

    /// The part of [`matches_shape`](Self::matches_shape) that needs no field: the target and
    /// the static name. The span core asks the fields by key itself (`span_keys`).
    pub(crate) fn matches_target_and_name(&self, target: &str, name: Option<&str>) -> bool {
        if let Some(module) = &self.target {
            if !within(target, module) {
                return false;
            }
        }
        match (self.span_name.as_deref(), name) {
            (Some(expected), Some(name)) => expected == name,
            _ => true,
        }
    }

    /// The fields a span must declare to match (besides one of the
    /// [name fields](Self::name_fields)).
    pub(crate) fn required_fields(&self) -> impl Iterator<Item = &str> {
        self.required_fields.iter().map(|f| &**f)
    }

    /// The fields this convention takes a tool name from.
    pub(crate) fn name_fields(&self) -> impl Iterator<Item = &str> {
        self.tool_name.iter().map(|s| &*s.field)
    }

    /// Whether this convention can be matched without `tracing` metadata (it has no
    /// [`filter`](Self::filter)): the span processor's conventions.
    #[cfg_attr(not(feature = "span-feed"), allow(dead_code))]
    pub(crate) fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// Whether a tool name comes from `otel.name` (which an OpenTelemetry span carries as its
    /// name, in place of the static one).
    #[cfg_attr(not(feature = "span-feed"), allow(dead_code))]
    pub(crate) fn names_from_otel_name(&self) -> bool {
        self.tool_name.iter().any(|s| s.field == semconv::OTEL_NAME)
    }

    /// The framework reports a failed call after its span, by an event in the parent span
    /// (adk's `tool_error`, swiftide's "Tool call failed"). A span of this convention that
    /// ends without a failure of its own then waits for the framework's next move in the
    /// parent: the matching event fails it (the oldest waiting call of the named tool —
    /// concurrent calls of one parent are told apart by tool name, in the order they started);
    /// another event of the framework's (from the verdict's target) there, a new tool span there
    /// or the parent's end makes it a success. It
    /// never waits longer than [`DEFERRED_VERDICT_BOUND`](crate::layer::DEFERRED_VERDICT_BOUND)
    /// or half its tool's probe lease (so a probe's verdict is never stale): every callback of
    /// the feed, and the gate, flush what is due.
    #[must_use]
    pub fn late_failure(mut self, verdict: LateFailure) -> Self {
        self.late_failure = Some(verdict);
        self
    }

    /// The late failure of this convention, if it has one.
    pub fn late_failure_event(&self) -> Option<&LateFailure> {
        self.late_failure.as_ref()
    }

    /// The framework marks its spans' outcomes only through the OpenTelemetry span API
    /// (`set_status` through tracing-opentelemetry's span extension), which a `tracing` layer
    /// cannot see: [`ToolHealthLayer`](crate::ToolHealthLayer) leaves these spans alone (it
    /// would count every failure as a success) and the span processor records them.
    #[must_use]
    pub fn sdk_only(mut self) -> Self {
        self.sdk_only = true;
        self
    }

    /// A span of this convention may sit inside a tool span of the same tool made by another
    /// layer of the stack (an MCP client's `tools/call` span inside a framework's
    /// `execute_tool` span): one call, one record. The `tracing` layer folds nested tool spans
    /// of one tool anyway; the OpenTelemetry feeds (the span processor, the OTLP receiver) see
    /// the inner span end first, so such a span waits for its parent — at most until the
    /// parent ends or [`DEFERRED_VERDICT_BOUND`](crate::layer::DEFERRED_VERDICT_BOUND) (half
    /// the probe lease, if sooner) — and is folded into the parent's record when the parent is
    /// a tool span of the same tool, recorded on its own otherwise.
    #[must_use]
    pub fn inside_tool_span(mut self) -> Self {
        self.nests = true;
        self
    }

    /// Whether spans of this convention wait for a parent tool span of the same tool (see
    /// [`inside_tool_span`](Self::inside_tool_span)).
    pub fn nests_in_tool_span(&self) -> bool {
        self.nests
    }

    /// Whether only the span processor reads this convention's spans.
    pub fn is_sdk_only(&self) -> bool {
        self.sdk_only
    }

    // ----------------------------------------------------------------------------- built-in

    /// The OpenTelemetry GenAI execute-tool span, from any source: declares
    /// `gen_ai.tool.name`; `gen_ai.operation.name`, when recorded, is `execute_tool`; the error
    /// type is `error.type`, then `gen_ai.tool.error.type`; the outcome
    /// `gen_ai.tool.call.outcome`.
    pub fn genai() -> Self {
        Self::new("genai")
            .tool_name_field(semconv::TOOL_NAME)
            .kind(semconv::OPERATION_NAME, semconv::EXECUTE_TOOL)
            .error_type_field(semconv::TOOL_ERROR_TYPE)
            .outcome_field(semconv::TOOL_CALL_OUTCOME)
    }

    /// The client span of the OpenTelemetry MCP conventions, from any source: declares
    /// `mcp.method.name`, which must be `tools/call` (and `gen_ai.operation.name`, when
    /// recorded, `execute_tool`); the tool name is `gen_ai.tool.name`, else `otel.name` minus
    /// `tools/call `; the error type is `error.type` (`tool_error` for a result with
    /// `isError: true`, else the JSON-RPC code), then `rpc.response.status_code`. What
    /// feature `mcp`'s `ToolHealthClient` writes.
    pub fn mcp() -> Self {
        Self::new("mcp")
            .requires_field(semconv::MCP_METHOD_NAME)
            .tool_name_field(semconv::TOOL_NAME)
            .tool_name_from(semconv::OTEL_NAME, "tools/call ")
            .kind(semconv::MCP_METHOD_NAME, semconv::MCP_TOOLS_CALL)
            .kind(semconv::OPERATION_NAME, semconv::EXECUTE_TOOL)
            .error_type_field(semconv::RPC_RESPONSE_STATUS_CODE)
            .outcome_field(semconv::TOOL_CALL_OUTCOME)
            .inside_tool_span()
    }

    /// rig (`rig-agent` 0.44): span `execute_tool` from `rig_agent`, the GenAI fields with the
    /// name recorded when the call starts, and rig's `gen_ai.tool.call.outcome` and
    /// `gen_ai.tool.error.type` (`invalid_args`, `timeout`, `not_found`, `other`, …) recorded
    /// just before it closes.
    pub fn rig() -> Self {
        Self::new("rig")
            .target("rig_agent")
            .span_name("execute_tool")
            .tool_name_field(semconv::TOOL_NAME)
            .kind(semconv::OPERATION_NAME, semconv::EXECUTE_TOOL)
            .error_type_field(semconv::TOOL_ERROR_TYPE)
            .outcome_field(semconv::TOOL_CALL_OUTCOME)
    }

    /// langchain-rust (7.0): span `tool.call` from `langchain_rust`, the name in `tool`, the
    /// error's text recorded in `error` on failure. Nothing marks a success, so strict mode
    /// cannot tell a cancelled call from a successful one.
    pub fn langchain_rust() -> Self {
        Self::new("langchain-rust")
            .target("langchain_rust")
            .span_name("tool.call")
            .tool_name_field("tool")
            .failure_field("error")
            .no_completion_marker()
    }

    /// adk-rust (`adk-agent` 2.3): an unnamed span from `adk_agent` with
    /// `otel.name` = `execute_tool {name}` and `tool.name`. adk reports a failure *after* the
    /// span, as a WARN event `tool_error` (or `tool_timeout`) with `tool.name` in the agent's
    /// span: a [late failure](Self::late_failure). Retries within one call (adk's retry
    /// budget) share one span: one record.
    pub fn adk() -> Self {
        Self::new("adk")
            .target("adk_agent")
            .span_name("")
            .requires_field("tool.name")
            .tool_name_from(semconv::OTEL_NAME, "execute_tool ")
            .no_completion_marker()
            .late_failure(
                LateFailure::event("adk_agent", Level::WARN)
                    .message("tool_error")
                    .message("tool_timeout")
                    .tool_name_field("tool.name"),
            )
    }

    /// swiftide (`swiftide-agents` 0.32): span `tool` from `swiftide_agents` whose only field
    /// is `otel.name` = `tool.{name}`, run in a task of its own. swiftide reports a failure
    /// after the span closed, as a WARN "Tool call failed, retrying" (or, at its retry limit,
    /// an ERROR "Tool call failed, retry limit reached") with `tool_call = ?call` in the parent
    /// `step` span: a [late failure](Self::late_failure). A repeated call (swiftide's retry:
    /// the model calls it again) is a call of its own each time.
    pub fn swiftide() -> Self {
        Self::new("swiftide")
            .target("swiftide_agents")
            .span_name("tool")
            .tool_name_from(semconv::OTEL_NAME, "tool.")
            .no_completion_marker()
            .late_failure(
                LateFailure::event("swiftide_agents", Level::WARN)
                    .message("Tool call failed")
                    .tool_name_in("tool_call", "name: \""),
            )
    }

    /// autoagents (`autoagents-telemetry` 0.4): span `autoagents.tool_call`, the name in
    /// `tool_name`, created by autoagents' telemetry task from the agent's events (not around
    /// the call). Its outcome is only the OpenTelemetry span's status (`Ok`, or `Error` with
    /// `error.message`), set through tracing-opentelemetry 0.33's span extension: read by the
    /// span processor for SDK 0.32 only ([`sdk_only`](Self::sdk_only)).
    pub fn autoagents() -> Self {
        Self::new("autoagents")
            .span_name("autoagents.tool_call")
            .tool_name_field("tool_name")
            .sdk_only()
    }

    /// genai (`genai` 0.7, feature `otel`): span `genai.execute_tool` from `genai`, the GenAI
    /// fields, a failure marked with `otel.status_code = error` and `error.type`
    /// (`genai::otel::agent::set_error`). genai marks nothing on success: a span that closes
    /// without a failure is a success even in strict mode.
    pub fn rust_genai() -> Self {
        Self::new("rust-genai")
            .target("genai")
            .span_name("genai.execute_tool")
            .tool_name_field(semconv::TOOL_NAME)
            .kind(semconv::OPERATION_NAME, semconv::EXECUTE_TOOL)
            .no_completion_marker()
    }

    // ------------------------------------------------------------------ other languages
    //
    // What Python and TypeScript agents export, each checked against spans captured from the
    // real framework (`tests/receiver/fixtures/`, replayed by `tests/receiver/`). The OTLP
    // receiver tries these before the built-in ones (`Convention::other_languages`).

    /// Pydantic AI (`pydantic-ai-slim` 2.68, instrumentation versions 2–6): spans from the
    /// instrumentation scope `pydantic-ai`, named `execute_tool {tool}` (version 2: `running
    /// tool`), the GenAI fields. A failure is status ERROR (empty description) with an
    /// `exception` event. Caller errors are marked by the framework: argument validation
    /// (`pydantic_ai.tool.failure_stage` = `validation`) and a tool raising `ModelRetry`
    /// (`pydantic_ai.tool.retry.cause` = `model_retry`: the tool answered that the model's
    /// request was wrong and asked it to try again — a healthy tool doing its job) both read
    /// as the error type `invalid_arguments`, which never counts against the tool. So does the
    /// attempt that uses up the tool's retries: Pydantic AI marks it with no retry cause but an
    /// `exception` event `UnexpectedModelBehavior` ("Tool … exceeded max retries count"): the
    /// model never corrected itself, which is no sickness of the tool. `ToolFailed` and any
    /// other exception are the tool's failures. An unknown tool makes no span.
    pub fn pydantic_ai() -> Self {
        Self::new("pydantic-ai")
            .target("pydantic-ai")
            .tool_name_field(semconv::TOOL_NAME)
            .kind(semconv::OPERATION_NAME, semconv::EXECUTE_TOOL)
            .error_type_when(
                "pydantic_ai.tool.failure_stage",
                "validation",
                INVALID_ARGUMENTS,
            )
            .error_type_when(
                "pydantic_ai.tool.retry.cause",
                "model_retry",
                INVALID_ARGUMENTS,
            )
            .event_error_type(
                "pydantic_ai.exceptions.UnexpectedModelBehavior",
                INVALID_ARGUMENTS,
            )
            .no_completion_marker()
    }

    /// The Vercel AI SDK (`ai` 6, and ai 7's `LegacyOpenTelemetry`): span `ai.toolCall`, the
    /// tool in `ai.toolCall.name`; a failure is status ERROR (with an `exception` event when an
    /// `Error` was thrown). Bad arguments and unknown tools make no tool span at all. (ai 7's
    /// `OpenTelemetry()` writes GenAI spans: [`genai`](Self::genai).)
    pub fn vercel_ai() -> Self {
        Self::new("vercel-ai")
            .span_name("ai.toolCall")
            .tool_name_field("ai.toolCall.name")
            .no_completion_marker()
    }

    /// LangChain through OpenInference (`openinference-instrumentation-langchain` 0.1):
    /// [`openinference`](Self::openinference)'s TOOL spans from that instrumentation's scope,
    /// plus LangChain's own verdicts: argument validation raises pydantic's `ValidationError`
    /// (read as `invalid_arguments`, a caller error), and a `ToolException` the tool handles
    /// (`handle_tool_error`) leaves status OK with `"status": "error"` in the tool message in
    /// `output.value` — counted as the tool's failure (LangChain's word for "the tool's
    /// execution failed", turned into the model's observation).
    pub fn openinference_langchain() -> Self {
        Self::openinference()
            .named("openinference-langchain")
            .target("openinference.instrumentation.langchain")
            .event_error_type(
                "pydantic_core._pydantic_core.ValidationError",
                INVALID_ARGUMENTS,
            )
            .outcome_in_json("output.value", ["data", "status"])
    }

    /// OpenInference (`openinference.span.kind` = `TOOL`, the tool in `tool.name`), from any
    /// instrumentation: the OpenAI Agents SDK's bridge, LlamaIndex, CrewAI, … Success is
    /// status OK, failure status ERROR. Through the OpenAI Agents SDK a wrong argument and a
    /// raising tool give the same span (the SDK redacts the error): both count as failures.
    pub fn openinference() -> Self {
        Self::new("openinference")
            .requires_field("openinference.span.kind")
            .tool_name_field("tool.name")
            .kind("openinference.span.kind", "TOOL")
            .no_completion_marker()
    }

    /// OpenLLMetry (`traceloop.span.kind` = `tool`): traceloop-sdk's `@tool` (the tool in
    /// `traceloop.entity.name`) and its instrumentations, such as the OpenAI Agents SDK's
    /// (`gen_ai.tool.name`). A failure is status ERROR.
    pub fn openllmetry() -> Self {
        Self::new("openllmetry")
            .requires_field("traceloop.span.kind")
            .tool_name_field("traceloop.entity.name")
            .tool_name_field(semconv::TOOL_NAME)
            .kind("traceloop.span.kind", "tool")
            .no_completion_marker()
    }

    /// LangSmith's OpenTelemetry export (`langsmith` with `LANGSMITH_OTEL_ENABLED`): runs of
    /// type tool are spans with `langsmith.span.kind` = `tool`, the tool in
    /// `langsmith.trace.name` (the run's name, also the span's name); a failure is status
    /// ERROR.
    pub fn langsmith() -> Self {
        Self::new("langsmith")
            .requires_field("langsmith.span.kind")
            .tool_name_field("langsmith.trace.name")
            .kind("langsmith.span.kind", "tool")
            .no_completion_marker()
    }

    /// The conventions of other languages' frameworks, in the order the OTLP receiver tries
    /// them (before [`builtin`](Self::builtin)): Pydantic AI, the Vercel AI SDK, LangChain
    /// through OpenInference, OpenInference, OpenLLMetry, LangSmith. The OpenAI Agents SDK is
    /// read through its OpenInference or OpenLLMetry bridge; OpenTelemetry's GenAI and MCP
    /// spans (the Vercel AI SDK 7, any other) by the built-in ones.
    pub fn other_languages() -> Vec<Self> {
        vec![
            Self::pydantic_ai(),
            Self::vercel_ai(),
            Self::openinference_langchain(),
            Self::openinference(),
            Self::openllmetry(),
            Self::langsmith(),
        ]
    }

    /// The same convention under another name.
    fn named(mut self, name: &'static str) -> Self {
        self.name = Cow::Borrowed(name);
        self
    }

    /// The conventions a layer (and the span processor) starts with, in the order they are
    /// tried: rig, langchain-rust, adk, swiftide, genai (each matched on its crate's target),
    /// autoagents (its span name; the span processor's only), then MCP and GenAI (matched on
    /// fields, from any source).
    pub fn builtin() -> Vec<Self> {
        vec![
            Self::rig(),
            Self::langchain_rust(),
            Self::adk(),
            Self::swiftide(),
            Self::rust_genai(),
            Self::autoagents(),
            Self::mcp(),
            Self::genai(),
        ]
    }

    // ----------------------------------------------------------------------------- builder support

    /// Replaces the tool-name sources with the one field (the builder's `tool_name_field`).
    pub(crate) fn set_tool_name_field(&mut self, field: Str) {
        self.tool_name = vec![NameSource {
            field,
            strip_prefix: None,
        }];
    }

    pub(crate) fn set_filter(&mut self, filter: fn(&Metadata<'_>) -> bool) {
        self.filter = Some(filter);
    }

    pub(crate) fn set_name(&mut self, name: &'static str) {
        self.name = Cow::Borrowed(name);
    }

    /// The field table the visitor reads this convention's spans with.
    pub(crate) fn compile(&self, retry_after_field: &Str) -> Compiled {
        let mut fields = Vec::new();
        for (rank, source) in self.tool_name.iter().enumerate() {
            fields.push((
                source.field.clone(),
                Meaning::Name {
                    rank: rank.min(u8::MAX as usize) as u8,
                    strip_prefix: source.strip_prefix.clone(),
                },
            ));
        }
        for (bit, (field, value)) in self.kinds.iter().enumerate() {
            fields.push((
                field.clone(),
                Meaning::Kind {
                    bit: 1 << bit,
                    expected: value.clone(),
                },
            ));
        }
        fields.push((
            Cow::Borrowed(semconv::ERROR_TYPE),
            Meaning::ErrorType { rank: 0 },
        ));
        for (rank, field) in self.error_type_fields.iter().enumerate() {
            fields.push((
                field.clone(),
                Meaning::ErrorType {
                    rank: (rank + 1).min(u8::MAX as usize) as u8,
                },
            ));
        }
        for field in &self.failure_fields {
            fields.push((field.clone(), Meaning::Failure));
        }
        if let Some(field) = &self.outcome_field {
            fields.push((field.clone(), Meaning::Outcome));
        }
        for (field, value, error_type) in &self.error_type_when {
            fields.push((
                field.clone(),
                Meaning::ErrorTypeWhen {
                    expected: value.clone(),
                    error_type: error_type.clone(),
                },
            ));
        }
        if let Some((field, path)) = &self.outcome_in_json {
            fields.push((
                field.clone(),
                Meaning::OutcomeInJson {
                    path: path.clone().into_boxed_slice(),
                },
            ));
        }
        fields.push((Cow::Borrowed(semconv::OTEL_STATUS_CODE), Meaning::Status));
        fields.push((
            Cow::Borrowed(semconv::HTTP_STATUS_CODE),
            Meaning::HttpStatus,
        ));
        fields.push((retry_after_field.clone(), Meaning::RetryAfter));
        Compiled {
            fields: fields.into_boxed_slice(),
            completion_marker: self.completion_marker,
            late_failure: self.late_failure.clone(),
            event_error_types: self.event_error_types.clone().into_boxed_slice(),
        }
    }
}

/// What a field means on a convention's spans.
#[derive(Debug, Clone)]
pub(crate) enum Meaning {
    /// The tool name (a lower rank wins), minus a prefix.
    Name { rank: u8, strip_prefix: Option<Str> },
    /// Must be `expected` when recorded; `bit` identifies the check.
    Kind { bit: u8, expected: Str },
    /// An error type (a lower rank wins).
    ErrorType { rank: u8 },
    /// Recorded non-empty: a failure.
    Failure,
    /// The framework's verdict.
    Outcome,
    /// Recorded with `expected`: the error type `error_type`.
    ErrorTypeWhen { expected: Str, error_type: Str },
    /// A JSON text whose string at `path` is the framework's verdict.
    OutcomeInJson { path: Box<[Str]> },
    /// `otel.status_code`.
    Status,
    /// `http.response.status_code`.
    HttpStatus,
    /// The retry hint, seconds.
    RetryAfter,
}

/// A convention ready for the visitor: each field it reads and what it means.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub(crate) fields: Box<[(Str, Meaning)]>,
    pub(crate) completion_marker: bool,
    pub(crate) late_failure: Option<LateFailure>,
    /// `(raw, error type)`: an error event's error type as this convention reads it.
    pub(crate) event_error_types: Box<[(Str, Str)]>,
}

impl Compiled {
    /// Whether `field` means anything on this convention's spans.
    pub(crate) fn reads(&self, field: &str) -> bool {
        self.fields.iter().any(|(name, _)| name == field)
    }

    /// An error event's error type as this convention reads it (see
    /// [`Convention::event_error_type`]).
    pub(crate) fn event_error_type(&self, error_type: Option<Text>) -> Option<Text> {
        let raw = error_type?;
        match self.event_error_types.iter().find(|(r, _)| **r == *raw) {
            Some((_, canonical)) => Some(Text::new(canonical)),
            None => Some(raw),
        }
    }
}

/// Adds `convention` to a builder's list (the layer's, the span processor's, the receiver's):
/// one of the same name is replaced in place; a new one goes after the `added` ones added
/// before it, ahead of the defaults, and counts as added.
pub(crate) fn add_to(list: &mut Vec<Convention>, added: &mut usize, convention: Convention) {
    match list.iter().position(|c| c.name() == convention.name()) {
        Some(i) => list[i] = convention,
        None => {
            list.insert((*added).min(list.len()), convention);
            *added += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_core::callsite::{Callsite, Identifier};
    use tracing_core::field::FieldSet;
    use tracing_core::{Interest, Kind, Level};

    struct Cs;
    impl Callsite for Cs {
        fn set_interest(&self, _: Interest) {}
        fn metadata(&self) -> &Metadata<'_> {
            unreachable!()
        }
    }
    static CS: Cs = Cs;

    fn meta(
        target: &'static str,
        name: &'static str,
        fields: &'static [&'static str],
    ) -> Metadata<'static> {
        Metadata::new(
            name,
            target,
            Level::INFO,
            None,
            None,
            None,
            FieldSet::new(fields, Identifier(&CS)),
            Kind::SPAN,
        )
    }

    #[test]
    fn builtin_matches_are_decided_by_target_name_and_fields() {
        let rig = meta(
            "rig_agent::agent::telemetry",
            "execute_tool",
            &[
                "gen_ai.operation.name",
                "gen_ai.tool.name",
                "gen_ai.tool.call.outcome",
            ],
        );
        assert!(Convention::rig().matches(&rig));
        assert!(Convention::genai().matches(&rig));
        // Another crate that merely starts with the same letters is not rig.
        let other = meta("rig_agentx", "execute_tool", &["gen_ai.tool.name"]);
        assert!(!Convention::rig().matches(&other));
        let lc = meta(
            "langchain_rust::agent::executor",
            "tool.call",
            &["tool", "error"],
        );
        assert!(Convention::langchain_rust().matches(&lc));
        assert!(!Convention::genai().matches(&lc));
        let lc_other = meta("langchain_rust::agent::executor", "agent.run", &["error"]);
        assert!(!Convention::langchain_rust().matches(&lc_other));
        let adk = meta("adk_agent::llm_agent", "", &["otel.name", "tool.name"]);
        assert!(Convention::adk().matches(&adk));
        let sw = meta("swiftide_agents::agent", "tool", &["otel.name"]);
        assert!(Convention::swiftide().matches(&sw));
        let mcp = meta(
            "my_app",
            "tools/call",
            &["otel.name", "mcp.method.name", "gen_ai.tool.name"],
        );
        assert!(Convention::mcp().matches(&mcp));
        assert!(!Convention::mcp().matches(&meta("my_app", "x", &["gen_ai.tool.name"])));
    }

    #[test]
    fn compiled_tables_read_the_universal_fields() {
        let c = Convention::langchain_rust().compile(&Cow::Borrowed("retry"));
        for f in ["tool", "error", "error.type", "otel.status_code", "retry"] {
            assert!(c.reads(f), "{f}");
        }
        assert!(!c.reads("gen_ai.tool.name"));
        assert!(!c.completion_marker);
    }
}
