//! [`ToolHealthLayerBuilder`]: span conventions and outcome rules of a [`ToolHealthLayer`].

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock, Weak};

use tracing::Metadata;

use crate::registry::ToolHealthRegistry;

use crate::infer::classify::{DefaultClassifier, OutcomeClassifier, SharedClassifier};
use crate::infer::conventions::Convention;

use super::callsites::CallsiteCache;
use super::{LayerCore, ToolHealthLayer, DEFAULT_RETRY_AFTER_FIELD};

/// The name of the convention `tool_name_field` / `span_filter` make of the GenAI one.
const CUSTOM: &str = "custom";

impl ToolHealthLayer {
    /// A builder for other span conventions and outcome rules.
    pub fn builder(registry: Arc<ToolHealthRegistry>) -> ToolHealthLayerBuilder {
        ToolHealthLayerBuilder {
            registry,
            conventions: Convention::builtin(),
            added: 0,
            retry_after_field: Cow::Borrowed(DEFAULT_RETRY_AFTER_FIELD),
            default_classifier: DefaultClassifier::new(),
            classifier: None,
        }
    }
}

/// Builds a [`ToolHealthLayer`].
#[must_use]
pub struct ToolHealthLayerBuilder {
    registry: Arc<ToolHealthRegistry>,
    conventions: Vec<Convention>,
    /// How many conventions [`convention`](ToolHealthLayerBuilder::convention) put in front.
    added: usize,
    retry_after_field: Cow<'static, str>,
    default_classifier: DefaultClassifier,
    classifier: Option<Arc<dyn OutcomeClassifier>>,
}

impl fmt::Debug for ToolHealthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthLayerBuilder")
            .field("registry", &self.registry)
            .field("conventions", &self.conventions)
            .field("default_classifier", &self.default_classifier)
            .field("custom_classifier", &self.classifier.is_some())
            .finish()
    }
}

impl ToolHealthLayerBuilder {
    /// Adds a span convention (see [`Convention`]), tried before the built-in ones; a
    /// convention with the name of one already there replaces it in place (start from
    /// [`Convention::rig`] and change it, to change how rig is read).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// use tool_health::layer::Convention;
    ///
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .convention(
    ///         Convention::new("my-agent")
    ///             .target("my_agent")
    ///             .span_name("tool_call")
    ///             .tool_name_field("tool")
    ///             .failure_field("error"),
    ///     )
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn convention(mut self, convention: Convention) -> Self {
        crate::infer::conventions::add_to(&mut self.conventions, &mut self.added, convention);
        self
    }

    /// Replaces every convention, the built-in ones included, with `conventions`, tried in
    /// this order (keep some built-in ones with [`Convention::builtin`] or their constructors).
    /// At most [`MAX_CONVENTIONS`](super::MAX_CONVENTIONS) count.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// use tool_health::layer::Convention;
    ///
    /// // Only the OpenTelemetry conventions, no framework ones.
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .conventions([Convention::mcp(), Convention::genai()])
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn conventions(mut self, conventions: impl IntoIterator<Item = Convention>) -> Self {
        self.conventions = conventions.into_iter().collect();
        self.added = 0;
        self
    }

    /// The generic convention (GenAI's, by default) made custom by `tool_name_field` or
    /// `span_filter`; added last if there is none.
    fn custom(&mut self) -> &mut Convention {
        let i = match self
            .conventions
            .iter()
            .position(|c| c.name() == CUSTOM || c.name() == "genai")
        {
            Some(i) => i,
            None => {
                self.conventions.push(Convention::genai());
                self.conventions.len() - 1
            }
        };
        let custom = &mut self.conventions[i];
        custom.set_name(CUSTOM);
        custom
    }

    /// The span field that carries the tool name in the generic convention (default
    /// [`DEFAULT_TOOL_NAME_FIELD`](super::DEFAULT_TOOL_NAME_FIELD), the GenAI one): a custom
    /// convention in place of the GenAI one, read the same way otherwise. The framework
    /// conventions, which match on their crate's target, stay.
    ///
    /// Without a [`span_filter`](Self::span_filter), a span is a tool-span candidate when it
    /// declares this field. A `gen_ai.operation.name` field, when declared, must still be
    /// `execute_tool`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// // For spans like `info_span!("tool", tool.name = "calculator")`:
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .tool_name_field("tool.name")
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn tool_name_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.custom().set_tool_name_field(field.into());
        self
    }

    /// The span field carrying a tool's retry hint in seconds (a number or a numeric string;
    /// default [`DEFAULT_RETRY_AFTER_FIELD`]). A failed tool span with this field — and an
    /// `http.response.status_code` of 429 or 503, or none — keeps the tool's breaker open at
    /// least that long if the failure leaves it open, and the gate's `retry_after` says so.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .retry_after_field("tool.retry_after_s")
    ///     .build();
    /// # let _ = layer;
    /// ```
    pub fn retry_after_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.retry_after_field = field.into();
        self
    }

    /// Decides from a span's metadata whether it can be a tool span in the generic convention
    /// (see [`tool_name_field`](Self::tool_name_field)), besides declaring the tool-name field.
    /// Called once per callsite, possibly while tracing registers the callsite: it must be
    /// pure — no panics, no tracing events.
    ///
    /// The tool name still comes from the [tool-name field](Self::tool_name_field).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use tool_health::{ToolHealthLayer, ToolHealthRegistry};
    /// let layer = ToolHealthLayer::builder(Arc::new(ToolHealthRegistry::new()))
    ///     .tool_name_field("tool")
    ///     .span_filter(|meta| meta.target().starts_with("my_agent::tools") && meta.name() == "call")
    ///     .build();
    /// # drop(layer);
    /// ```
    pub fn span_filter(mut self, filter: fn(&Metadata<'_>) -> bool) -> Self {
        self.custom().set_filter(filter);
        self
    }

    /// Strict mode (default off): a span that closes without a completion marker was cancelled
    /// and records nothing; a probe bound to it is released at once. Configures the
    /// [`DefaultClassifier`]; ignored with a custom [`classifier`](Self::classifier).
    pub fn strict(mut self, strict: bool) -> Self {
        self.default_classifier = self.default_classifier.strict(strict);
        self
    }

    /// The `error.type` values that are the caller's fault (replacing
    /// [`DEFAULT_CALLER_ERRORS`](super::DEFAULT_CALLER_ERRORS)): such calls are counted as ignored, never as failures.
    /// Configures the [`DefaultClassifier`]; ignored with a custom
    /// [`classifier`](Self::classifier).
    pub fn caller_errors<I>(mut self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.default_classifier = self.default_classifier.caller_errors(errors);
        self
    }

    /// Replaces the outcome rules entirely (see [`OutcomeClassifier`]; a custom classifier may
    /// delegate to a [`DefaultClassifier`]).
    pub fn classifier(mut self, classifier: impl OutcomeClassifier) -> Self {
        self.classifier = Some(Arc::new(classifier));
        self
    }

    /// The layer.
    pub fn build(self) -> ToolHealthLayer {
        let classifier = self
            .classifier
            .unwrap_or_else(|| Arc::new(self.default_classifier));
        let mut conventions = self.conventions;
        conventions.truncate(super::MAX_CONVENTIONS);
        let compiled: Box<[_]> = conventions
            .iter()
            .map(|c| c.compile(&self.retry_after_field))
            .collect();
        let late = compiled
            .iter()
            .any(super::late::is_late)
            .then(crate::infer::deferred::Deferred::new);
        let has_late = late.is_some();
        let core = Arc::new(LayerCore {
            registry: self.registry,
            conventions: conventions.into_boxed_slice(),
            compiled,
            classifier: SharedClassifier(classifier),
            callsites: CallsiteCache::new(),
            live_tool_spans: AtomicUsize::new(0),
            unentered_tool_spans: AtomicUsize::new(0),
            ids: super::bind::ToolSpanIds::new(),
            late,
            me: OnceLock::new(),
        });
        let _ = core.me.set(Arc::downgrade(&core));
        if has_late {
            let weak: Weak<dyn crate::hook::DeferredFlush> = Arc::downgrade(&core) as _;
            crate::hook::install_deferred_flush(weak);
        }
        ToolHealthLayer {
            core,
            attached: false,
            span_fn: None,
            dispatch: OnceLock::new(),
        }
    }
}
