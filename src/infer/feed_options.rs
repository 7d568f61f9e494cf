//! What every feed of the span core is built with: the conventions, strict mode, the caller
//! errors, a classifier of the application's — one builder behind the SDK span processors'
//! and the span feed's (`crate::span_processor`, `crate::span_feed`).

use std::fmt;
use std::sync::Arc;

use crate::infer::classify::{DefaultClassifier, OutcomeClassifier};
use crate::infer::conventions::{self, Convention};
use crate::infer::span_core::{Feed, SpanCore};
use crate::registry::ToolHealthRegistry;

/// The options every span-core feed shares.
#[derive(Debug)]
pub(crate) struct FeedOptions {
    registry: Arc<ToolHealthRegistry>,
    conventions: Vec<Convention>,
    added: usize,
    default_classifier: DefaultClassifier,
    classifier: Option<ClassifierBox>,
}

struct ClassifierBox(Arc<dyn OutcomeClassifier>);

impl fmt::Debug for ClassifierBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OutcomeClassifier")
    }
}

#[allow(dead_code)] // a feed may use some of them only
impl FeedOptions {
    /// The built-in conventions, not strict, the default caller errors.
    pub(crate) fn new(registry: Arc<ToolHealthRegistry>) -> Self {
        Self {
            registry,
            conventions: Convention::builtin(),
            added: 0,
            default_classifier: DefaultClassifier::new(),
            classifier: None,
        }
    }

    /// Adds a convention before the built-in ones (one of the same name is replaced in place).
    pub(crate) fn convention(mut self, convention: Convention) -> Self {
        conventions::add_to(&mut self.conventions, &mut self.added, convention);
        self
    }

    /// Replaces every convention.
    pub(crate) fn conventions(mut self, conventions: impl IntoIterator<Item = Convention>) -> Self {
        self.conventions = conventions.into_iter().collect();
        self.added = 0;
        self
    }

    pub(crate) fn strict(mut self, strict: bool) -> Self {
        self.default_classifier = self.default_classifier.strict(strict);
        self
    }

    pub(crate) fn caller_errors<I>(mut self, errors: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.default_classifier = self.default_classifier.caller_errors(errors);
        self
    }

    pub(crate) fn classifier(mut self, classifier: impl OutcomeClassifier) -> Self {
        self.classifier = Some(ClassifierBox(Arc::new(classifier)));
        self
    }

    /// The core of an in-process feed (spans of this process, recorded as they end).
    pub(crate) fn build(self) -> Arc<SpanCore> {
        SpanCore::new(
            self.registry,
            self.conventions,
            self.classifier.map(|c| c.0),
            self.default_classifier,
            Feed::InProcess,
            None,
            None,
        )
    }
}
