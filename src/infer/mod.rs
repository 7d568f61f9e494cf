//! One inference, several feeds: what a finished tool call looked like, in a neutral shape,
//! and what it means.
//!
//! A *feed* watches spans and fills the neutral shape ([`facts`]): the `tracing` layer
//! (`crate::layer`) from `tracing` spans and events, the span processor
//! (`crate::span_processor`, features `span-processor` / `span-processor-sdk-0-32`) from the
//! OpenTelemetry SDK's finished spans, the OTLP receiver (`crate::receiver`) from other
//! processes' spans, feeds outside the crate (`crate::span_feed`: the Python package) — all
//! but the layer through one core, `span_core`, so each feed only adapts its span to
//! `SpanView` and goes down. None classifies by itself: the [`conventions`] (each
//! framework's span shape, as data) say which fields mean what, and the [`classify`] rules turn
//! the facts into an outcome — so a framework learnt once is learnt for every feed.
//!
//! Some frameworks report a call's failure after its span, in the parent span (adk, swiftide):
//! a convention's [late failure](conventions::Convention::late_failure). The call's outcome
//! then waits in a small, bounded table ([`deferred`]) until the framework's next move in the
//! parent, or a flush that comes before a probe's lease could expire.
//!
//! | file | owns |
//! |---|---|
//! | `facts.rs` | the neutral shape: field values read per convention, what is known of a call |
//! | `conventions.rs` | [`Convention`](conventions::Convention): each framework's span shape, late verdicts |
//! | `classify.rs` | [`OutcomeClassifier`](classify::OutcomeClassifier), [`DefaultClassifier`](classify::DefaultClassifier), [`SpanFacts`](classify::SpanFacts) |
//! | `deferred.rs` | calls whose verdict comes after their span: the bounded table, the flush rule |
//! | `span_core.rs` | a finished OpenTelemetry-shaped span (any SDK version's, received over OTLP, or handed in through `crate::span_feed`), seen through `SpanView`, into records: conventions, classification, late verdicts and nested calls exactly as the layer runs them (feature `span-feed`, which the span processors and the receiver turn on) |
//! | `span_keys.rs` | the attribute keys a span core asks for: the table a keyed span (a Python dict) is looked up by, each convention's match and reads by key |
//! | `span_view.rs` | `SpanView`: how the span core sees a finished span, whatever its source |
//! | `text.rs` | `Text`: a name or error type copied off a span, in a buffer recycled per thread |
//! | `feed_options.rs` | what every span-core feed can be built with: conventions, strict mode, caller errors, a classifier |

pub(crate) mod classify;
pub(crate) mod conventions;
pub(crate) mod deferred;
pub(crate) mod facts;
#[cfg(feature = "span-feed")]
pub(crate) mod feed_options;
#[cfg(feature = "span-feed")]
pub(crate) mod span_core;
#[cfg(feature = "span-feed")]
pub(crate) mod span_keys;
#[cfg(feature = "span-feed")]
pub(crate) mod span_view;
pub(crate) mod text;
