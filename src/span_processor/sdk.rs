//! One adapter per supported SDK version: the same code over each version's types (a macro:
//! the versions' `SpanProcessor`, `SpanData`, `Value` and `Status` have the same shape but are
//! distinct types).

/// Implements `ToolHealthSpanProcessor` for the SDK crate `$sdk` with API crate `$otel`.
macro_rules! processor_for {
    ($sdk:ident, $otel:ident, $version:literal) => {
        use std::fmt;
        use std::sync::Arc;
        use std::time::{Duration, SystemTime};

        use $otel::trace::Status;
        use $otel::{Context, KeyValue, Value};
        use $sdk::error::OTelSdkResult;
        use $sdk::trace::{Span, SpanData, SpanProcessor};

        use crate::registry::ToolHealthRegistry;
        use crate::infer::span_core::{
            Attributes, EventView, SpanCore, SpanStatus, SpanView, Val,
        };
        use crate::span_processor::Builder;

        #[doc = concat!(
            "Feeds a [`ToolHealthRegistry`] from the tool calls in OpenTelemetry spans: an `opentelemetry_sdk` ",
            $version,
            " `SpanProcessor`.\n\n",
            "Add it to the `SdkTracerProvider` spans end in; it reads each finished span with the ",
            "same conventions and classification as [`ToolHealthLayer`](crate::ToolHealthLayer) ",
            "(see [the module docs](crate::span_processor)) and records the calls. It exports ",
            "nothing and keeps no span: add your exporter's processor beside it."
        )]
        pub struct ToolHealthSpanProcessor {
            core: Arc<SpanCore>,
        }

        impl fmt::Debug for ToolHealthSpanProcessor {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.core, f)
            }
        }

        impl ToolHealthSpanProcessor {
            /// A processor feeding `registry`, with the built-in conventions, not strict,
            /// caller errors [`DEFAULT_CALLER_ERRORS`](crate::layer::DEFAULT_CALLER_ERRORS).
            pub fn new(registry: Arc<ToolHealthRegistry>) -> Self {
                Self::builder(registry).build()
            }

            /// A builder for other conventions and outcome rules.
            pub fn builder(registry: Arc<ToolHealthRegistry>) -> ToolHealthSpanProcessorBuilder {
                ToolHealthSpanProcessorBuilder(Builder::new(registry))
            }

            /// The registry this processor feeds.
            pub fn registry(&self) -> &Arc<ToolHealthRegistry> {
                self.core.registry()
            }
        }

        /// Builds a [`ToolHealthSpanProcessor`] (the same options as the layer's builder).
        #[derive(Debug)]
        #[must_use]
        pub struct ToolHealthSpanProcessorBuilder(Builder);

        impl ToolHealthSpanProcessorBuilder {
            /// Adds a convention, tried before the built-in ones (one of the same name is
            /// replaced in place). A convention with a [`filter`](crate::layer::Convention::filter)
            /// (a `tracing` metadata predicate) never matches an OpenTelemetry span.
            pub fn convention(self, convention: crate::infer::conventions::Convention) -> Self {
                Self(self.0.convention(convention))
            }

            /// Replaces every convention, the built-in ones included.
            pub fn conventions(
                self,
                conventions: impl IntoIterator<Item = crate::infer::conventions::Convention>,
            ) -> Self {
                Self(self.0.conventions(conventions))
            }

            /// Strict mode (default off), as the layer's.
            pub fn strict(self, strict: bool) -> Self {
                Self(self.0.strict(strict))
            }

            /// The `error.type` values that are the caller's fault, as the layer's.
            pub fn caller_errors<I>(self, errors: I) -> Self
            where
                I: IntoIterator,
                I::Item: Into<String>,
            {
                Self(self.0.caller_errors(errors))
            }

            /// Replaces the outcome rules, as the layer's.
            pub fn classifier(self, classifier: impl crate::infer::classify::OutcomeClassifier) -> Self {
                Self(self.0.classifier(classifier))
            }

            /// The processor.
            pub fn build(self) -> ToolHealthSpanProcessor {
                ToolHealthSpanProcessor {
                    core: self.0.build(),
                }
            }
        }

        fn val(value: &Value) -> Val<'_> {
            match value {
                Value::String(s) => Val::Str(s.as_str()),
                Value::I64(i) => Val::I64(*i),
                Value::F64(x) => Val::F64(*x),
                Value::Bool(b) => Val::Bool(*b),
                other => Val::Other(other),
            }
        }

        fn each(attributes: &[KeyValue], f: &mut dyn FnMut(&str, Val<'_>)) {
            for kv in attributes {
                f(kv.key.as_str(), val(&kv.value));
            }
        }

        fn get<'a>(attributes: &'a [KeyValue], key: &str) -> Option<Val<'a>> {
            attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| val(&kv.value))
        }

        struct EventRef<'a>(&'a $otel::trace::Event);

        impl Attributes for EventRef<'_> {
            fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
                each(&self.0.attributes, f)
            }
            fn get(&self, key: &str) -> Option<Val<'_>> {
                get(&self.0.attributes, key)
            }
        }

        impl EventView for EventRef<'_> {
            fn name(&self) -> &str {
                &self.0.name
            }
        }

        struct SpanRef<'a>(&'a SpanData);

        impl Attributes for SpanRef<'_> {
            fn each(&self, f: &mut dyn FnMut(&str, Val<'_>)) {
                each(&self.0.attributes, f)
            }
            fn get(&self, key: &str) -> Option<Val<'_>> {
                get(&self.0.attributes, key)
            }
        }

        impl SpanView for SpanRef<'_> {
            fn name(&self) -> &str {
                &self.0.name
            }
            fn scope(&self) -> &str {
                self.0.instrumentation_scope.name()
            }
            fn span_id(&self) -> u64 {
                u64::from_be_bytes(self.0.span_context.span_id().to_bytes())
            }
            fn parent_id(&self) -> u64 {
                u64::from_be_bytes(self.0.parent_span_id.to_bytes())
            }
            fn start(&self) -> SystemTime {
                self.0.start_time
            }
            fn end(&self) -> SystemTime {
                self.0.end_time
            }
            fn status(&self) -> SpanStatus {
                match &self.0.status {
                    Status::Error { .. } => SpanStatus::Error,
                    Status::Ok => SpanStatus::Ok,
                    _ => SpanStatus::Unset,
                }
            }
            fn events(&self, f: &mut dyn FnMut(&dyn EventView)) {
                for event in self.0.events.iter() {
                    f(&EventRef(event));
                }
            }
        }

        impl SpanProcessor for ToolHealthSpanProcessor {
            fn on_start(&self, _span: &mut Span, _cx: &Context) {}

            fn on_end(&self, span: SpanData) {
                // A panic in here (a classifier's, say) must not take the SDK's caller down.
                let core = &self.core;
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    core.on_end(&SpanRef(&span), None)
                }));
            }

            fn force_flush(&self) -> OTelSdkResult {
                Ok(())
            }

            fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
                Ok(())
            }
        }
    };
}

pub(crate) use processor_for;
