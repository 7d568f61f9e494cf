//! [`ToolHealthLayerBuilder`]: span conventions and outcome rules of a [`ToolHealthLayer`].

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use tracing::Metadata;

use crate::registry::ToolHealthRegistry;

use super::callsites::CallsiteCache;
use super::classify::{DefaultClassifier, OutcomeClassifier, SharedClassifier};
use super::{LayerCore, ToolHealthLayer, DEFAULT_RETRY_AFTER_FIELD, DEFAULT_TOOL_NAME_FIELD};

impl ToolHealthLayer {
    /// A builder for other span conventions and outcome rules.
    pub fn builder(registry: Arc<ToolHealthRegistry>) -> ToolHealthLayerBuilder {
        ToolHealthLayerBuilder {
            registry,
            tool_name_field: Cow::Borrowed(DEFAULT_TOOL_NAME_FIELD),
            retry_after_field: Cow::Borrowed(DEFAULT_RETRY_AFTER_FIELD),
            span_filter: None,
            default_classifier: DefaultClassifier::new(),
            classifier: None,
        }
    }
}

/// Builds a [`ToolHealthLayer`].
#[must_use]
pub struct ToolHealthLayerBuilder {
    registry: Arc<ToolHealthRegistry>,
    tool_name_field: Cow<'static, str>,
    retry_after_field: Cow<'static, str>,
    span_filter: Option<fn(&Metadata<'_>) -> bool>,
    default_classifier: DefaultClassifier,
    classifier: Option<Arc<dyn OutcomeClassifier>>,
}

impl fmt::Debug for ToolHealthLayerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolHealthLayerBuilder")
            .field("registry", &self.registry)
            .field("tool_name_field", &self.tool_name_field)
            .field("span_filter", &self.span_filter.is_some())
            .field("default_classifier", &self.default_classifier)
            .field("custom_classifier", &self.classifier.is_some())
            .finish()
    }
}

impl ToolHealthLayerBuilder {
    /// The span field that carries the tool name (default [`DEFAULT_TOOL_NAME_FIELD`]).
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
        self.tool_name_field = field.into();
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

    /// Decides from a span's metadata whether it can be a tool span, instead of "declares the
    /// tool-name field". Called once per callsite, possibly while tracing registers the
    /// callsite: it must be pure — no panics, no tracing events.
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
        self.span_filter = Some(filter);
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
        ToolHealthLayer {
            core: Arc::new(LayerCore {
                registry: self.registry,
                tool_name_field: self.tool_name_field,
                retry_after_field: self.retry_after_field,
                span_filter: self.span_filter,
                classifier: SharedClassifier(classifier),
                callsites: CallsiteCache::new(),
                live_tool_spans: AtomicUsize::new(0),
            }),
            bind_fn: None,
            span_fn: None,
            dispatch: OnceLock::new(),
        }
    }
}
