//! Environment variables as OpenTelemetry's configuration rules read them: a variable that is
//! empty (or only whitespace) counts as unset. Compose files and CI templates often leave
//! `OTEL_SERVICE_NAME=` or `OTEL_EXPORTER_OTLP_PROTOCOL=` empty; such a value must never win over
//! a default or a value given in code. Every variable this crate reads goes through [`var`].

/// The variable's value as set (a password may begin with a space; parsers trim what their
/// format allows); `None` when it is unset, empty, only whitespace or not UTF-8.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::var;

    #[test]
    fn empty_and_blank_values_are_unset() {
        // Names no other test reads; edition 2021: set_var is safe.
        std::env::set_var("TOOL_HEALTH_ENV_TEST_EMPTY", "");
        std::env::set_var("TOOL_HEALTH_ENV_TEST_BLANK", "  \t");
        std::env::set_var("TOOL_HEALTH_ENV_TEST_SET", " grpc ");
        assert_eq!(var("TOOL_HEALTH_ENV_TEST_EMPTY"), None);
        assert_eq!(var("TOOL_HEALTH_ENV_TEST_BLANK"), None);
        assert_eq!(var("TOOL_HEALTH_ENV_TEST_UNSET_NEVER"), None);
        assert_eq!(var("TOOL_HEALTH_ENV_TEST_SET").as_deref(), Some(" grpc "));
    }
}
