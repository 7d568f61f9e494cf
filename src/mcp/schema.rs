//! The argument check: a call's arguments against its tool's `inputSchema` (from `tools/list`),
//! before anything is sent.
//!
//! Each tool's schema is compiled once, the first time a call needs it, and kept until the
//! server's list changes: a list read through the client ([`ToolHealthClient::list_tools`]
//! (super::ToolHealthClient::list_tools)) replaces the schemas it lists (a schema equal to the
//! one already compiled keeps its validator), and
//! [`server_list_changed`](super::ToolHealthClient::server_list_changed) or a new peer makes
//! the next call read the list again. A tool the list does not name, a schema that does not
//! compile (an unknown dialect, a `$ref` outside the document: nothing is fetched) and a
//! client built with [`SchemaCheck::Off`] are not checked: the server decides.
//!
//! A call costs one lock-free load of the server's compiled schemas; a schema that cannot
//! refuse any object (`{}`, `{"type": "object"}` with optional properties of any value, what
//! SDKs list for a tool without arguments) is never compiled nor validated; any other is
//! validated in one pass, which names the problems of a refused call without a second.
//!
//! # Lax and strict
//!
//! The check must never refuse a call the server would accept. The official Python SDK
//! validates with pydantic in its lax mode: it reads `"21"` and `true` as integers, ignores
//! properties the schema does not list, and checks no `format`; the TypeScript SDK (zod) strips
//! unknown properties too. So [`SchemaCheck::Lax`] (the default) checks a relaxed copy of the
//! schema, in which
//!
//! * `integer` also admits a string that reads as one (`" +1_000 "`, `"21.0"`) and a boolean;
//!   `number` a string that reads as a number (`"2.5"`, `"1e3"`, `"inf"`) and a boolean;
//!   `boolean` the strings pydantic reads as booleans (`"yes"`, `"off"`, `"0"`, …) and `0`/`1`;
//! * an `enum` or `const` that holds numbers or booleans also admits any string;
//! * `additionalProperties: false` and `unevaluatedProperties: false` are dropped;
//! * `format` is not checked.
//!
//! Everything else holds as written: a missing required property, an object where a string is
//! due, a string where an object is due, `minimum`, `pattern`, `maxLength`…
//! [`SchemaCheck::Strict`] checks the schema exactly as written (formats as its dialect says),
//! for servers that validate as strictly (the TypeScript SDK, rmcp's serde). What the model
//! reads names every problem the *written* schema finds (at most [`MAX_PROBLEMS`], each cut to
//! [`MAX_PROBLEM_LEN`] bytes), so it can correct itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::ArcSwap;
use jsonschema::Validator;
use rmcp::model::{JsonObject, Tool};
use serde_json::{json, Map, Value};

/// How [`call_tool`](super::ToolHealthClient::call_tool) checks arguments against the tool's
/// `inputSchema` (see the module docs of [`mcp`](super), "The argument check").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SchemaCheck {
    /// No check: every call goes to the server, which answers bad arguments itself (and the
    /// SDKs' answers to them are classified as the caller's, never the tool's).
    Off,
    /// The default: refuses only arguments no SDK would accept — a relaxed copy of the schema
    /// that admits what pydantic's lax mode and zod's stripping accept.
    #[default]
    Lax,
    /// The schema exactly as written, for servers that validate as strictly.
    Strict,
}

/// At most this many problems are named to the model.
pub const MAX_PROBLEMS: usize = 5;
/// Each problem named to the model is cut to this many bytes.
pub const MAX_PROBLEM_LEN: usize = 240;

/// The compiled schemas of one server's tools. A call reads them without a lock (one
/// [`ArcSwap`] load); a list read or an invalidation installs a new [`Known`], one writer at a
/// time.
#[derive(Debug, Default)]
pub(crate) struct Schemas {
    known: ArcSwap<Known>,
    /// Serializes the writers, so that none of them loses another's change; calls never take it.
    write: Mutex<()>,
}

#[derive(Debug, Default, Clone)]
struct Known {
    /// A list was read since the last invalidation.
    listed: bool,
    /// Since then, a list was read from its first page ...
    from_first: bool,
    /// ... to its last: `tools` is the server's whole list.
    complete: bool,
    tools: Arc<HashMap<Box<str>, Arc<Compiled>>>,
}

/// One tool's schema and its validators, each compiled at its first use (`None`: it does not
/// compile, the tool is not checked).
struct Compiled {
    schema: Arc<JsonObject>,
    /// The schema admits every object in lax mode, or in strict mode: checking it can only say
    /// yes, so it is skipped (nothing compiled, nothing validated).
    admits_all_lax: bool,
    admits_all_strict: bool,
    /// The relaxed copy's validator, and the copy (to name a problem the way the schema as
    /// written would).
    lax: OnceLock<Option<(Validator, Value)>>,
    strict: OnceLock<Option<Validator>>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("admits_all_lax", &self.admits_all_lax)
            .field("admits_all_strict", &self.admits_all_strict)
            .field("lax", &self.lax.get().map(Option::is_some))
            .field("strict", &self.strict.get().map(Option::is_some))
            .finish_non_exhaustive()
    }
}

impl Compiled {
    fn new(schema: Arc<JsonObject>) -> Self {
        Self {
            admits_all_lax: admits_every_object(&schema, true),
            admits_all_strict: admits_every_object(&schema, false),
            schema,
            lax: OnceLock::new(),
            strict: OnceLock::new(),
        }
    }

    fn admits_all(&self, mode: SchemaCheck) -> bool {
        match mode {
            SchemaCheck::Strict => self.admits_all_strict,
            _ => self.admits_all_lax,
        }
    }

    fn strict(&self) -> Option<&Validator> {
        self.strict
            .get_or_init(|| compile(Value::Object(JsonObject::clone(&self.schema)), true))
            .as_ref()
    }

    fn lax(&self) -> Option<&(Validator, Value)> {
        self.lax
            .get_or_init(|| {
                let mut schema = Value::Object(JsonObject::clone(&self.schema));
                relax(&mut schema);
                compile(schema.clone(), false).map(|v| (v, schema))
            })
            .as_ref()
    }
}

/// Keywords that assert nothing: a schema of these alone admits every value.
const ANNOTATIONS: [&str; 13] = [
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$dynamicAnchor",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
];

/// Whether `schema` admits every value: `true`, or annotations only (`{}`, `{"title": …}`).
fn admits_every_value(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(node) => node
            .keys()
            .all(|k| ANNOTATIONS.contains(&k.as_str()) || k == "writeOnly"),
        _ => false,
    }
}

/// Whether `schema` admits every JSON object — the arguments of a call always are one — in
/// lax mode (`lax`, which drops `additionalProperties: false`) or as written: only keywords
/// that assert nothing of an object (annotations; `type` naming `object`; `properties`,
/// `patternProperties`, `additionalProperties` of schemas that admit every value; `required`
/// empty; `minProperties: 0`; `format`, which applies to strings only). Anything else, a `$ref`
/// included, is left to the validator.
fn admits_every_object(schema: &JsonObject, lax: bool) -> bool {
    schema.iter().all(|(key, value)| match key.as_str() {
        k if ANNOTATIONS.contains(&k) || k == "writeOnly" || k == "format" => true,
        "type" => match value {
            Value::String(t) => t == "object",
            Value::Array(types) => types.iter().any(|t| t == "object"),
            _ => false,
        },
        "properties" | "patternProperties" => value
            .as_object()
            .is_some_and(|children| children.values().all(admits_every_value)),
        "additionalProperties" | "unevaluatedProperties" => {
            admits_every_value(value) || (lax && value == &Value::Bool(false))
        }
        "required" => value.as_array().is_some_and(Vec::is_empty),
        "minProperties" => value.as_u64() == Some(0),
        _ => false,
    })
}

/// Compiles `schema` in the dialect its `$schema` names (2020-12 without one), fetching
/// nothing: `None` when it does not compile.
fn compile(schema: Value, formats: bool) -> Option<Validator> {
    jsonschema::options()
        .offline()
        .should_validate_formats(formats)
        .build(&schema)
        .ok()
}

impl Schemas {
    /// Installs what `change` makes of the known schemas, one writer at a time.
    fn change(&self, change: impl FnOnce(&mut Known)) {
        let _writer = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        let mut known = Known::clone(&self.known.load());
        change(&mut known);
        self.known.store(Arc::new(known));
    }

    /// Whether a call should read the tool list first: none was read since the server's list
    /// last changed.
    pub(crate) fn needs_list(&self) -> bool {
        !self.known.load().listed
    }

    /// The tools known from the last list, sorted by name.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .known
            .load()
            .tools
            .keys()
            .map(|n| n.to_string())
            .collect();
        names.sort_unstable();
        names
    }

    /// The server's list changed (or the peer did): the next call reads it again.
    pub(crate) fn invalidate(&self) {
        self.change(|known| {
            known.listed = false;
            known.from_first = false;
            known.complete = false;
        });
    }

    /// Whether the server lists `tool`: `None` while its whole list is not known (no list read
    /// since it last changed, or not to its last page).
    pub(crate) fn knows(&self, tool: &str) -> Option<bool> {
        let known = self.known.load();
        (known.listed && known.complete).then(|| known.tools.contains_key(tool))
    }

    /// Takes the schemas of a page of the tool list; the first page replaces what was known,
    /// the `last` one completes it. A schema equal to the one known keeps its compiled
    /// validators.
    pub(crate) fn update(&self, tools: &[Tool], first_page: bool, last: bool) {
        self.change(|known| {
            let mut next = if first_page {
                HashMap::with_capacity(tools.len())
            } else {
                HashMap::clone(&known.tools)
            };
            for tool in tools {
                let name: &str = &tool.name;
                let kept = known
                    .tools
                    .get(name)
                    .filter(|c| c.schema == tool.input_schema)
                    .cloned();
                let compiled =
                    kept.unwrap_or_else(|| Arc::new(Compiled::new(Arc::clone(&tool.input_schema))));
                next.insert(name.into(), compiled);
            }
            known.tools = Arc::new(next);
            known.from_first |= first_page;
            known.complete = known.from_first && last;
            known.listed = true;
        });
    }

    /// Checks `arguments` (absent: `{}`) for `tool`: the problems to name to the model, or
    /// `None` when they pass (or cannot be checked). Takes no lock: a schema that admits every
    /// object is not even looked at.
    pub(crate) fn check(
        &self,
        mode: SchemaCheck,
        tool: &str,
        arguments: &mut Option<JsonObject>,
    ) -> Option<Vec<String>> {
        if mode == SchemaCheck::Off {
            return None;
        }
        let known = self.known.load();
        let compiled = known.tools.get(tool)?;
        if compiled.admits_all(mode) {
            return None;
        }
        // The arguments are moved into a `Value` for the validator and back: no copy.
        let given = arguments.is_some();
        let instance = Value::Object(arguments.take().unwrap_or_default());
        let problems = check_instance(compiled, mode, &instance);
        if let Value::Object(map) = instance {
            if given {
                *arguments = Some(map);
            }
        }
        problems
    }
}

/// Checks `instance` with the mode's one validator: a quick yes, or the problems, named by that
/// same validator's errors (the relaxed copy's in words of the schema as written, through
/// the marks [`relax`] leaves). A refused call is validated once more to name its problems,
/// never by a second validator (the strict one is not even compiled in lax mode).
fn check_instance(compiled: &Compiled, mode: SchemaCheck, instance: &Value) -> Option<Vec<String>> {
    let (validator, relaxed) = match mode {
        SchemaCheck::Strict => (compiled.strict()?, None),
        _ => {
            let (v, relaxed) = compiled.lax()?;
            (v, Some(relaxed))
        }
    };
    // One pass: the errors of an instance that passes are none, and a refused one is not
    // validated a second time to name its problems.
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .take(MAX_PROBLEMS)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "(the arguments)"
            } else {
                &path
            };
            let written = relaxed.and_then(|r| as_written(&e, r));
            match written {
                Some(text) => bounded(format!("{path}: {text}")),
                None => bounded(format!("{path}: {e}")),
            }
        })
        .collect();
    (!problems.is_empty()).then_some(problems)
}

/// The keyword a widened part of the relaxed copy stood for, as written (`{"type": …}`,
/// `{"enum": …}`, `{"const": …}`), kept beside the `anyOf` that replaced it.
const WRITTEN: &str = "x-tool-health-written";

/// A relaxed copy's error in the words the schema as written would use, when it comes from a
/// part [`relax`] widened (an `anyOf` of spellings says nothing useful): `"x" is not of type
/// "integer"`, `… is not one of …`, `… was expected`. `None` for any other error.
fn as_written(e: &jsonschema::ValidationError<'_>, relaxed: &Value) -> Option<String> {
    let at = e.schema_path().to_string();
    let written = relaxed.pointer(at.strip_suffix("/anyOf")?)?.get(WRITTEN)?;
    let instance = e.instance();
    if let Some(t) = written.get("type") {
        return Some(match t {
            Value::Array(types) => {
                let names: Vec<String> = types.iter().map(|t| format!("{t}")).collect();
                format!("{instance} is not of types {}", names.join(", "))
            }
            t => format!("{instance} is not of type {t}"),
        });
    }
    if let Some(Value::Array(options)) = written.get("enum") {
        let shown: Vec<String> = options.iter().map(Value::to_string).collect();
        return Some(format!("{instance} is not one of {}", shown.join(", ")));
    }
    written.get("const").map(|c| format!("{c} was expected"))
}

/// `s` cut to [`MAX_PROBLEM_LEN`] bytes at a character boundary, with an ellipsis.
fn bounded(mut s: String) -> String {
    if s.len() > MAX_PROBLEM_LEN {
        let mut end = MAX_PROBLEM_LEN - '…'.len_utf8();
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// A string pydantic reads as an integer (whitespace, sign, `_` between digits, a zero
/// fraction), a little wider than pydantic (never narrower).
const INTEGER_STRING: &str = r"^\s*[+-]?\d[\d_]*(\.0*)?\s*$";
/// A string pydantic reads as a number.
const NUMBER_STRING: &str = r"^\s*[+-]?((\d[\d_]*(\.[\d_]*)?|\.\d[\d_]*)([eE][+-]?\d+)?|[iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN])\s*$";
/// A string pydantic reads as a boolean.
const BOOLEAN_STRING: &str = r"^\s*([01]|[tT]([rR][uU][eE])?|[fF]([aA][lL][sS][eE])?|[yY]([eE][sS])?|[nN][oO]?|[oO][nN]|[oO][fF][fF])\s*$";

/// Keywords whose value is a map of subschemas.
const SCHEMA_MAPS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is a subschema, or (`items`, draft 7) an array of them.
const SCHEMA_VALUES: [&str; 12] = [
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAYS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];

/// Relaxes `schema` in place (see the module docs, "Lax and strict"). Only schema positions
/// are visited: `enum`, `const`, `default` and `examples` hold data, left as they are.
pub(crate) fn relax(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return; // `true` / `false` schemas
    };
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(children)) = node.get_mut(key) {
            children.values_mut().for_each(relax);
        }
    }
    for key in SCHEMA_VALUES {
        match node.get_mut(key) {
            Some(Value::Array(children)) => children.iter_mut().for_each(relax),
            Some(child) => relax(child),
            None => {}
        }
    }
    for key in SCHEMA_ARRAYS {
        if let Some(Value::Array(children)) = node.get_mut(key) {
            children.iter_mut().for_each(relax);
        }
    }
    if let Some(Value::Object(deps)) = node.get_mut("dependencies") {
        // Draft 7: a subschema, or a list of property names.
        deps.values_mut().filter(|d| d.is_object()).for_each(relax);
    }
    for key in ["additionalProperties", "unevaluatedProperties"] {
        if node.get(key) == Some(&Value::Bool(false)) {
            node.remove(key);
        }
    }
    let mut also: Vec<Value> = Vec::new();
    if let Some(types) = node.get("type").and_then(type_names) {
        if let Some(mut widened) = widen(&types) {
            if let (Some(t), Value::Object(w)) = (node.remove("type"), &mut widened) {
                w.insert(WRITTEN.to_owned(), json!({ "type": t }));
            }
            also.push(widened);
        }
    }
    for key in ["enum", "const"] {
        let holds_scalars = match node.get(key) {
            Some(Value::Array(values)) if key == "enum" => values.iter().any(is_number_or_bool),
            Some(value) if key == "const" => is_number_or_bool(value),
            _ => false,
        };
        if holds_scalars {
            if let Some(value) = node.remove(key) {
                let mut exact = Map::new();
                exact.insert(key.to_owned(), value);
                let exact = Value::Object(exact);
                also.push(json!({"anyOf": [exact.clone(), {"type": "string"}], WRITTEN: exact}));
            }
        }
    }
    if !also.is_empty() {
        match node.get_mut("allOf") {
            Some(Value::Array(all)) => all.extend(also),
            _ => {
                node.insert("allOf".to_owned(), Value::Array(also));
            }
        }
    }
}

fn is_number_or_bool(v: &Value) -> bool {
    v.is_number() || v.is_boolean()
}

/// The type names of a `type` keyword (a name or an array of names).
fn type_names(t: &Value) -> Option<Vec<&str>> {
    match t {
        Value::String(s) => Some(vec![s.as_str()]),
        Value::Array(a) => a.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

/// `{"anyOf": …}` admitting `types` and the spellings lax servers read as them, or `None`
/// when none of them is widened.
fn widen(types: &[&str]) -> Option<Value> {
    if !types
        .iter()
        .any(|t| matches!(*t, "integer" | "number" | "boolean"))
    {
        return None;
    }
    let mut any: Vec<Value> = Vec::new();
    for t in types {
        any.push(json!({ "type": t }));
        match *t {
            "integer" => {
                any.push(json!({"type": "string", "pattern": INTEGER_STRING}));
                any.push(json!({"type": "boolean"}));
            }
            "number" => {
                any.push(json!({"type": "string", "pattern": NUMBER_STRING}));
                any.push(json!({"type": "boolean"}));
            }
            "boolean" => {
                any.push(json!({"type": "string", "pattern": BOOLEAN_STRING}));
                any.push(json!({"enum": [0, 1]}));
            }
            _ => {}
        }
    }
    Some(json!({ "anyOf": any }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemas(schema: Value) -> Schemas {
        let Value::Object(schema) = schema else {
            panic!("an object")
        };
        let tool = Tool::new("t", "a tool", Arc::new(schema));
        let s = Schemas::default();
        s.update(&[tool], true, true);
        s
    }

    fn check(s: &Schemas, mode: SchemaCheck, args: Value) -> Option<Vec<String>> {
        let Value::Object(args) = args else {
            panic!("an object")
        };
        let mut args = Some(args);
        let r = s.check(mode, "t", &mut args);
        assert!(args.is_some(), "the arguments are given back");
        r
    }

    #[test]
    fn a_tool_is_known_only_from_a_whole_list() {
        let tool = |n: &str| Tool::new(n.to_owned(), "a tool", Arc::new(JsonObject::new()));
        let s = Schemas::default();
        assert_eq!(s.knows("a"), None, "nothing read");
        s.update(&[tool("a")], true, false);
        assert_eq!(s.knows("b"), None, "the first page of several");
        s.update(&[tool("b")], false, true);
        assert_eq!(
            (s.knows("a"), s.knows("b"), s.knows("c")),
            (Some(true), Some(true), Some(false))
        );
        s.invalidate();
        assert_eq!(
            s.knows("a"),
            None,
            "the list changed: not known until read again"
        );
        s.update(&[tool("c")], false, true);
        assert_eq!(
            s.knows("c"),
            None,
            "a last page alone is not the whole list"
        );
    }

    // The Python SDK's schema of `needs_int(n: int)` (captured from `mcp` 2.3.0).
    fn python_needs_int() -> Value {
        json!({"properties": {"n": {"title": "N", "type": "integer"}}, "required": ["n"],
               "type": "object", "title": "needs_intArguments"})
    }

    #[test]
    fn lax_admits_what_pydantic_reads_as_an_integer_and_refuses_the_rest() {
        let s = schemas(python_needs_int());
        // Accepted by the Python SDK 2.3.0 server (see integrations/tests/mcp_sdk).
        for ok in [
            json!(21),
            json!("21"),
            json!(" 7 "),
            json!("1_000"),
            json!("21.0"),
            json!("+21"),
            json!(true),
            json!(2.0),
        ] {
            assert_eq!(check(&s, SchemaCheck::Lax, json!({"n": ok})), None, "{ok}");
        }
        for bad in [
            json!("twenty-one"),
            json!("0x10"),
            json!(2.5),
            json!(null),
            json!({}),
        ] {
            let problems = check(&s, SchemaCheck::Lax, json!({"n": bad})).expect("refused");
            assert!(problems[0].starts_with("/n: "), "{problems:?}");
        }
        let missing = check(&s, SchemaCheck::Lax, json!({})).expect("refused");
        assert_eq!(
            missing,
            vec![r#"(the arguments): "n" is a required property"#.to_owned()]
        );
        assert_eq!(
            check(&s, SchemaCheck::Lax, json!({"n": 1, "extra": true})),
            None
        );
    }

    #[test]
    fn strict_checks_the_schema_as_written() {
        // The TypeScript SDK 1.20's schema (zod 3): draft 7, no additional properties.
        let s = schemas(
            json!({"type": "object", "properties": {"n": {"type": "integer"}},
            "required": ["n"], "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"}),
        );
        assert_eq!(check(&s, SchemaCheck::Strict, json!({"n": 21})), None);
        for bad in [
            json!({"n": "21"}),
            json!({"n": true}),
            json!({"n": 1, "x": 1}),
        ] {
            assert!(
                check(&s, SchemaCheck::Strict, bad.clone()).is_some(),
                "{bad}"
            );
        }
        // Lax lets the same through: the SDK strips the extra property.
        assert_eq!(check(&s, SchemaCheck::Lax, json!({"n": 1, "x": 1})), None);
        assert_eq!(check(&s, SchemaCheck::Off, json!({"n": "x"})), None);
    }

    #[test]
    fn lax_relaxes_nested_schemas_unions_and_enums_but_not_data() {
        let s = schemas(json!({
            "type": "object",
            "properties": {
                "opt": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null},
                "flag": {"type": "boolean"},
                "rate": {"type": "number", "minimum": 0},
                "mode": {"enum": [1, 2]},
                "items": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
                "name": {"type": "string", "maxLength": 3},
                "enum": {"const": {"type": "integer"}}
            },
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}},
                                 "required": ["x"]}}
        }));
        let ok = json!({"opt": "5", "flag": "yes", "rate": "2.5", "mode": "1",
                        "items": [{"x": "3"}], "name": "abc", "enum": {"type": "integer"}});
        assert_eq!(check(&s, SchemaCheck::Lax, ok.clone()), None);
        assert!(check(&s, SchemaCheck::Strict, ok).is_some());
        for bad in [
            json!({"opt": "five"}),
            json!({"flag": "maybe"}),
            json!({"rate": "fast"}),
            json!({"items": [{"x": "three"}]}),
            json!({"items": [{}]}),
            json!({"name": 12}),
            json!({"name": "abcd"}),
            json!({"enum": {"type": "string"}}),
        ] {
            assert!(check(&s, SchemaCheck::Lax, bad.clone()).is_some(), "{bad}");
        }
    }

    #[test]
    fn unknown_tools_schemas_that_do_not_compile_and_remote_refs_are_not_checked() {
        let s = schemas(json!({"$ref": "https://example.com/schema.json"}));
        assert_eq!(check(&s, SchemaCheck::Strict, json!({"any": 1})), None);
        let s = schemas(json!({"type": 12}));
        assert_eq!(check(&s, SchemaCheck::Lax, json!({})), None);
        let mut args = None;
        assert_eq!(s.check(SchemaCheck::Strict, "other", &mut args), None);
        assert!(args.is_none(), "absent arguments stay absent");
    }

    #[test]
    fn a_new_list_replaces_the_schemas_and_an_equal_schema_keeps_its_validator() {
        let s = schemas(python_needs_int());
        assert!(!s.needs_list());
        assert!(check(&s, SchemaCheck::Lax, json!({"n": "x"})).is_some());
        let before = Arc::clone(s.known.load().tools.get("t").expect("known"));
        let Value::Object(same) = python_needs_int() else {
            unreachable!()
        };
        s.update(&[Tool::new("t", "again", Arc::new(same))], true, true);
        assert!(Arc::ptr_eq(
            &before,
            s.known.load().tools.get("t").expect("known")
        ));
        let Value::Object(loose) = json!({"type": "object"}) else {
            unreachable!()
        };
        s.update(&[Tool::new("t", "changed", Arc::new(loose))], true, true);
        assert_eq!(check(&s, SchemaCheck::Lax, json!({"n": "x"})), None);
        s.invalidate();
        assert!(s.needs_list());
    }

    #[test]
    fn a_refused_call_is_named_by_the_validator_that_refused_it_in_the_schemas_words() {
        // Lax: one validator decides and names; the strict one is never built.
        let s = schemas(json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "mode": {"enum": [1, 2]},
            "size": {"type": ["integer", "null"]},
            "name": {"type": "string", "maxLength": 3},
        }, "required": ["n"]}));
        let problems = check(
            &s,
            SchemaCheck::Lax,
            json!({"n": "twenty-one", "mode": [3], "size": {}, "name": "long"}),
        )
        .expect("refused");
        assert!(
            problems.contains(&r#"/n: "twenty-one" is not of type "integer""#.to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(&"/mode: [3] is not one of 1, 2".to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(&r#"/size: {} is not of types "integer", "null""#.to_owned()),
            "{problems:?}"
        );
        assert!(
            problems.contains(&r#"/name: "long" is longer than 3 characters"#.to_owned()),
            "{problems:?}"
        );
        // What lax admits is never named, even beside what it refuses.
        let problems =
            check(&s, SchemaCheck::Lax, json!({"n": "21", "name": "long"})).expect("refused");
        assert_eq!(problems.len(), 1, "{problems:?}");
        let compiled = s.known.load().tools.get("t").cloned().unwrap();
        assert!(
            compiled.strict.get().is_none(),
            "the strict validator was built to name a lax refusal"
        );
        // Strict: its own validator, once built.
        let problems = check(&s, SchemaCheck::Strict, json!({"n": "21"})).expect("refused");
        assert_eq!(problems, [r#"/n: "21" is not of type "integer""#]);
    }

    #[test]
    fn a_schema_that_admits_every_object_is_never_compiled_nor_validated() {
        // What SDKs list for a tool without arguments, and schemas of annotations only.
        for admits_all in [
            json!({}),
            json!({"type": "object"}),
            json!({"type": "object", "properties": {}, "title": "noArgsArguments"}),
            json!({"type": ["object", "null"], "required": [], "additionalProperties": true}),
            json!({"type": "object", "properties": {"x": {"description": "anything"}, "y": true}}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                   "additionalProperties": {}, "minProperties": 0}),
        ] {
            let s = schemas(admits_all.clone());
            for mode in [SchemaCheck::Lax, SchemaCheck::Strict] {
                assert_eq!(
                    check(&s, mode, json!({"x": [1], "z": "w"})),
                    None,
                    "{admits_all}"
                );
            }
            let compiled = s.known.load().tools.get("t").cloned().unwrap();
            assert!(
                compiled.lax.get().is_none() && compiled.strict.get().is_none(),
                "compiled for nothing: {admits_all}"
            );
        }
        // `additionalProperties: false` is dropped in lax mode only.
        let s = schemas(json!({"type": "object", "additionalProperties": false}));
        assert_eq!(check(&s, SchemaCheck::Lax, json!({"x": 1})), None);
        assert!(check(&s, SchemaCheck::Strict, json!({"x": 1})).is_some());
        // Anything that can refuse an object is checked.
        for (schema, refused) in [
            (json!({"type": "object", "required": ["a"]}), json!({})),
            (
                json!({"properties": {"a": {"type": "string"}}}),
                json!({"a": {}}),
            ),
            (json!({"type": "string"}), json!({})),
            (json!({"type": "object", "minProperties": 1}), json!({})),
            (
                json!({"patternProperties": {"^a": {"type": "string"}}}),
                json!({"ab": 1}),
            ),
            (
                json!({"type": "object", "properties": {"a": false}}),
                json!({"a": 1}),
            ),
            (
                json!({"$defs": {"n": {"type": "string"}}, "additionalProperties": {"$ref": "#/$defs/n"}}),
                json!({"a": 1}),
            ),
        ] {
            let s = schemas(schema.clone());
            assert!(check(&s, SchemaCheck::Lax, refused).is_some(), "{schema}");
        }
    }

    #[test]
    fn problems_are_bounded() {
        let s = schemas(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let huge = "x".repeat(10_000);
        let problems = check(&s, SchemaCheck::Lax, json!({"n": huge})).expect("refused");
        assert!(
            problems.iter().all(|p| p.len() <= MAX_PROBLEM_LEN),
            "{problems:?}"
        );
        let many: Map<String, Value> = (0..20).map(|i| (format!("p{i}"), json!("no"))).collect();
        let s = schemas(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
        let problems = check(&s, SchemaCheck::Lax, Value::Object(many)).expect("refused");
        assert_eq!(problems.len(), MAX_PROBLEMS);
    }
}
