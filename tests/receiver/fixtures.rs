//! The captured requests of real agent frameworks (`fixtures/<capture>/otlp.pb`, the bytes the
//! framework's OTLP exporter sent), replayed into a registry: each tool's successes, failures
//! and caller errors as the framework meant them (`SPANS.md`'s scenarios: ok, raises,
//! bad_args, unknown_tool, and each framework's own), and nothing recorded for any span that
//! is not a tool call. The same requests as OTLP/JSON read the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use tool_health::receiver::{Format, Receiver};
use tool_health::{CircuitBreakerConfig, ToolHealthRegistry};

use crate::support::{counts, fixture};

/// (tool, successes, failures, caller errors).
type Expected = &'static [(&'static str, u64, u64, u64)];

/// Pydantic AI (every instrumentation version): ok; raises; `ModelRetry` then its retry (a
/// caller error, then a success); `ToolFailed` (the tool's failure); bad arguments (marked
/// `failure_stage = validation`: a caller error) then the corrected call; an unknown tool makes
/// no span.
const PYDANTIC: Expected = &[
    ("flaky", 0, 1, 0),
    ("flaky_failed", 0, 1, 0),
    ("flaky_retry", 1, 0, 1),
    ("weather", 2, 0, 1),
];

/// The Vercel AI SDK: ok and streamed ok; raises and streamed raises; a thrown string (status
/// ERROR, no description, no event: still a failure). Bad arguments and unknown tools make no
/// tool span.
const VERCEL: Expected = &[
    ("flaky", 0, 2, 0),
    ("flaky_string", 0, 1, 0),
    ("weather", 2, 0, 0),
];

/// The OpenAI Agents SDK through either bridge: ok; raises; a fatal raise; bad arguments and
/// non-JSON arguments give the same span as a raise (the SDK redacts the error): failures —
/// the documented blind spot.
const OPENAI_AGENTS: Expected = &[
    ("flaky", 0, 1, 0),
    ("flaky_fatal", 0, 1, 0),
    ("weather", 1, 2, 0),
];

/// LangChain + OpenInference: ok; raises; a handled `ToolException` (status OK, `"status":
/// "error"` in `output.value`: the tool's failure); bad arguments (pydantic's
/// `ValidationError`: a caller error).
const LANGCHAIN: Expected = &[
    ("flaky", 0, 1, 0),
    ("flaky_handled", 0, 1, 0),
    ("weather", 1, 0, 1),
];

/// traceloop-sdk's `@tool`: ok; raises; a wrong-typed argument failing inside the tool body
/// (no validation in the SDK: the tool's failure).
const TRACELOOP: Expected = &[("flaky", 0, 1, 0), ("weather", 1, 1, 0)];

const CAPTURES: &[(&str, Expected)] = &[
    ("pydantic-ai-v5-default", PYDANTIC),
    ("pydantic-ai-v6", PYDANTIC),
    ("pydantic-ai-v2", PYDANTIC),
    ("pydantic-ai-v5-nocontent", PYDANTIC),
    ("vercel-ai6", VERCEL),
    ("vercel-ai7-otel", VERCEL),
    ("vercel-ai7-legacy", VERCEL),
    ("openai-agents-openinference", OPENAI_AGENTS),
    ("openai-agents-openllmetry", OPENAI_AGENTS),
    ("langchain-openinference", LANGCHAIN),
    ("traceloop-sdk", TRACELOOP),
];

fn registry() -> Arc<ToolHealthRegistry> {
    // A threshold no capture reaches: the counts are the point here.
    Arc::new(ToolHealthRegistry::with_config(CircuitBreakerConfig {
        failure_threshold: 100,
        ..Default::default()
    }))
}

fn expected(e: Expected) -> BTreeMap<String, (u64, u64, u64)> {
    e.iter()
        .map(|&(t, s, f, i)| (t.to_owned(), (s, f, i)))
        .collect()
}

#[test]
fn every_captured_framework_counts_as_it_meant() {
    for &(capture, want) in CAPTURES {
        let registry = registry();
        let receiver = Receiver::new(registry.clone());
        let ingested = receiver
            .ingest(&fixture(capture), Format::Protobuf)
            .unwrap_or_else(|e| panic!("{capture}: {e}"));
        assert_eq!(ingested.rejected, 0, "{capture}: {}", ingested.message);
        assert!(ingested.spans > 0, "{capture}");
        assert_eq!(counts(&registry), expected(want), "{capture}");
        assert_eq!(receiver.waiting(), 0, "{capture}: nothing left waiting");
    }
}

#[test]
fn the_same_requests_as_otlp_json_count_the_same() {
    for &(capture, want) in CAPTURES {
        let request = ExportTraceServiceRequest::decode(&*fixture(capture)).unwrap();
        let json = serde_json::to_vec(&request).unwrap();
        let registry = registry();
        let receiver = Receiver::new(registry.clone());
        let ingested = receiver
            .ingest(&json, Format::Json)
            .unwrap_or_else(|e| panic!("{capture}: {e}"));
        assert_eq!(ingested.rejected, 0, "{capture}: {}", ingested.message);
        assert_eq!(counts(&registry), expected(want), "{capture} (JSON)");
    }
}

#[test]
fn each_capture_is_read_by_the_convention_named_for_its_framework() {
    // With only the generic conventions (GenAI, MCP, OpenInference, OpenLLMetry), the
    // framework-specific verdicts are lost: this is what each framework's convention adds.
    let generic = || {
        let mut c = vec![
            tool_health::layer::Convention::openinference(),
            tool_health::layer::Convention::openllmetry(),
        ];
        c.extend(tool_health::layer::Convention::builtin());
        c
    };
    let count = |capture: &str, conventions: Vec<tool_health::layer::Convention>| {
        let registry = registry();
        let receiver = Receiver::builder(registry.clone())
            .conventions(conventions)
            .build()
            .unwrap();
        receiver
            .ingest(&fixture(capture), Format::Protobuf)
            .unwrap();
        counts(&registry)
    };
    // Pydantic AI's caller errors are failures to the plain GenAI convention.
    let plain = count("pydantic-ai-v5-default", generic());
    assert_eq!(plain["weather"], (2, 1, 0));
    assert_eq!(plain["flaky_retry"], (1, 1, 0));
    // The Vercel AI SDK 6's `ai.toolCall` spans are no GenAI spans.
    assert!(count("vercel-ai6", generic()).is_empty());
    // LangChain's handled ToolException is a success, its ValidationError a failure.
    let plain = count("langchain-openinference", generic());
    assert_eq!(plain["flaky_handled"], (1, 0, 0));
    assert_eq!(plain["weather"], (1, 1, 0));
}
