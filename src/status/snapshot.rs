//! The JSON shape of `GET /tools` (and of the stream's `snapshot` events): one object per
//! tool, in a page of the tool list. `docs/status.md` documents every field; the gateway's
//! `GET /v1/tools` serves the same shape. Field names only ever get added (`version` says
//! which shape a document has).

use std::fmt;
use std::time::Duration;

use crate::breaker::BreakerState;
use crate::control::ToolControl;
use crate::registry::{ToolHealthRegistry, ToolHealthSnapshot};
use crate::stats::HealthStatus;

use super::groups::{Group, Groups, Verdict};
use super::history::{self, Inner as HistoryInner, TransitionRecord};
use super::json;

/// The version of the JSON shape (`"version"` in every document).
pub const SHAPE_VERSION: u64 = 1;
/// Tools per page unless the query says otherwise.
pub const DEFAULT_LIMIT: usize = 100;
/// The largest `limit` a query may ask for (the registry's default cap on tracked tools).
pub const MAX_LIMIT: usize = 10_000;
/// The longest `filter` a query may carry, in bytes.
pub const MAX_FILTER_LEN: usize = 256;

/// Which tools a query lists, in which order, and which page of them: the query string of
/// `GET /tools` and `GET /events` (`filter`, `state`, `sort`, `offset`, `limit`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolsQuery {
    /// Only tools whose name contains this (ASCII case-insensitive); empty: every tool.
    pub filter: String,
    /// Only tools in this state.
    pub state: StateFilter,
    /// The order.
    pub sort: Sort,
    /// Tools skipped before the page starts.
    pub offset: usize,
    /// Tools in the page, at most [`MAX_LIMIT`] (0: the counts alone).
    pub limit: usize,
}

impl Default for ToolsQuery {
    fn default() -> Self {
        Self {
            filter: String::new(),
            state: StateFilter::All,
            sort: Sort::Sick,
            offset: 0,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// Which tools a [`ToolsQuery`] keeps (`state=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateFilter {
    /// Every tool (`all`, the default).
    All,
    /// Tools that are not closed and healthy under no control (`sick`).
    Sick,
    /// Breaker open, forced open included (`open`).
    Open,
    /// Breaker half-open: a probe in flight (`half_open`).
    HalfOpen,
    /// Breaker closed (`closed`).
    Closed,
    /// Under an operator control: forced open or closed (`forced`).
    Forced,
}

/// The order of a [`ToolsQuery`]'s tools (`sort=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sort {
    /// Sick tools first (`sick`, the default): open, half-open, unhealthy, degraded, then the
    /// rest; within each, the lower score first, then by name.
    Sick,
    /// By name, byte-wise (`name`).
    Name,
}

/// A query string that [`ToolsQuery::parse`] refused: the parameter and what it accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The parameter.
    pub parameter: &'static str,
    /// What was wrong, with the accepted values or range.
    pub message: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "query parameter `{}`: {}", self.parameter, self.message)
    }
}

impl std::error::Error for QueryError {}

impl ToolsQuery {
    /// Parses a URL query string (without the `?`; `+` and percent-escapes decoded). Unknown
    /// parameters are ignored; a known one with a bad value is an error naming it.
    pub fn parse(query: &str) -> Result<Self, QueryError> {
        let mut q = Self::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            let err = |parameter: &'static str, message: String| QueryError { parameter, message };
            match name {
                "filter" => {
                    if value.len() > MAX_FILTER_LEN {
                        return Err(err(
                            "filter",
                            format!("at most {MAX_FILTER_LEN} bytes, got {}", value.len()),
                        ));
                    }
                    q.filter = value;
                }
                "state" => {
                    q.state = match value.as_str() {
                        "" | "all" => StateFilter::All,
                        "sick" => StateFilter::Sick,
                        "open" => StateFilter::Open,
                        "half_open" => StateFilter::HalfOpen,
                        "closed" => StateFilter::Closed,
                        "forced" => StateFilter::Forced,
                        _ => {
                            return Err(err(
                                "state",
                                "one of all, sick, open, half_open, closed, forced".to_owned(),
                            ))
                        }
                    }
                }
                "sort" => {
                    q.sort = match value.as_str() {
                        "" | "sick" => Sort::Sick,
                        "name" => Sort::Name,
                        _ => return Err(err("sort", "one of sick, name".to_owned())),
                    }
                }
                "offset" => {
                    q.offset = value.parse().map_err(|_| {
                        err("offset", "a whole number of tools, 0 or more".to_owned())
                    })?;
                }
                "limit" => {
                    q.limit = value
                        .parse()
                        .ok()
                        .filter(|l| *l <= MAX_LIMIT)
                        .ok_or_else(|| {
                            err("limit", format!("a whole number from 0 to {MAX_LIMIT}"))
                        })?;
                }
                _ => {}
            }
        }
        Ok(q)
    }

    fn keeps(&self, s: &ToolHealthSnapshot, group_refused: bool) -> bool {
        let state = match self.state {
            StateFilter::All => true,
            StateFilter::Sick => rank(s, group_refused) < HEALTHY_RANK,
            StateFilter::Open => s.breaker == BreakerState::Open,
            StateFilter::HalfOpen => s.breaker == BreakerState::HalfOpen,
            StateFilter::Closed => s.breaker == BreakerState::Closed,
            StateFilter::Forced => s.control != ToolControl::Normal,
        };
        state && (self.filter.is_empty() || contains_ignore_ascii_case(&s.tool, &self.filter))
    }
}

/// `application/x-www-form-urlencoded` decoding of one value (invalid UTF-8 replaced).
fn decode(value: &str) -> String {
    let plus = value.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

fn contains_ignore_ascii_case(haystack: &str, needle: &str) -> bool {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    n.is_empty() || (n.len() <= h.len() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n)))
}

/// The rank of "closed, healthy, under no control": [`StateFilter::Sick`] keeps what ranks
/// lower.
const HEALTHY_RANK: u8 = 5;

/// How sick a tool is, 0 (open, or refused by its group) to [`HEALTHY_RANK`].
fn rank(s: &ToolHealthSnapshot, group_refused: bool) -> u8 {
    let forced_open = matches!(s.control, ToolControl::ForcedOpen { .. });
    match s.breaker {
        _ if forced_open || group_refused => 0,
        BreakerState::Open => 0,
        BreakerState::HalfOpen => 1,
        BreakerState::Closed => match s.status {
            HealthStatus::Unhealthy => 2,
            HealthStatus::Degraded => 3,
            HealthStatus::Healthy if s.control != ToolControl::Normal || s.shadow => 4,
            HealthStatus::Healthy => HEALTHY_RANK,
        },
    }
}

/// What the page shows as the state: an operator control first, else the breaker's.
fn shown_state(s: &ToolHealthSnapshot) -> &'static str {
    match s.control {
        ToolControl::ForcedOpen { .. } => "forced_open",
        ToolControl::ForcedClosed => "forced_closed",
        _ => s.breaker.as_str(),
    }
}

/// What the page's header counts (over every tracked tool, whatever the query).
#[derive(Debug, Default)]
struct Counts {
    closed: u64,
    open: u64,
    half_open: u64,
    forced: u64,
    /// Available by their own breaker, refused by their group's.
    group_refused: u64,
    healthy: u64,
    degraded: u64,
    unhealthy: u64,
}

/// Milliseconds, rounded up: a countdown shown from it never ends early.
fn millis_ceil(d: Duration) -> u64 {
    let ms = d.as_millis();
    let ms = if d.subsec_nanos() % 1_000_000 != 0 {
        ms + 1
    } else {
        ms
    };
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// Settings of the document that are not per query, and the groups now.
#[derive(Debug, Clone)]
pub(super) struct Meta {
    pub(super) controls: bool,
    pub(super) sample_interval: Duration,
    pub(super) groups: Groups,
}

/// The document of `GET /tools` for `query`.
pub(super) fn tools_json(
    registry: &ToolHealthRegistry,
    history: &history::History,
    query: &ToolsQuery,
    meta: Meta,
) -> String {
    let now = registry.now();
    let mut all = registry.health_summary(); // sorted by name
    let groups = &meta.groups;
    let mut counts = Counts::default();
    // Per group: its tools tracked, and those refusing by their own breaker.
    let mut tallies = vec![(0u64, 0u64); groups.list.len()];
    for s in &all {
        if groups.verdict(s).refused_by_group(s) {
            counts.group_refused += 1;
        }
        if let Some(i) = groups.index_of(&s.tool) {
            tallies[i].0 += 1;
            tallies[i].1 += u64::from(s.retry_after.is_some());
        }
        match s.breaker {
            BreakerState::Closed => counts.closed += 1,
            BreakerState::Open => counts.open += 1,
            BreakerState::HalfOpen => counts.half_open += 1,
        }
        if s.control != ToolControl::Normal {
            counts.forced += 1;
        }
        match s.status {
            HealthStatus::Healthy => counts.healthy += 1,
            HealthStatus::Degraded => counts.degraded += 1,
            HealthStatus::Unhealthy => counts.unhealthy += 1,
        }
    }
    let tracked = all.len();
    all.retain(|s| query.keeps(s, groups.verdict(s).refused_by_group(s)));
    let matched = all.len();
    // The order as indices into `all` (sorted by name already): sorting small keys, not the
    // snapshots, and an equal rank and score falls back to the index, which is the name order.
    let mut order: Vec<(u8, f64, u32)> = all
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let group_refused = groups.verdict(s).refused_by_group(s);
            (rank(s, group_refused), s.score, i as u32)
        })
        .collect();
    if query.sort == Sort::Sick {
        order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    }
    let page = order
        .get(query.offset.min(matched)..)
        .unwrap_or_default()
        .iter()
        .take(query.limit)
        .map(|&(_, _, i)| &all[i as usize]);

    let history = history.lock();
    let mut out = String::with_capacity(512 + query.limit.min(matched) * 768);
    out.push('{');
    json::key(&mut out, "version");
    json::uint(&mut out, SHAPE_VERSION);
    out.push(',');
    json::key(&mut out, "at_ms");
    json::uint(&mut out, millis_floor(now));
    out.push(',');
    json::key(&mut out, "controls");
    json::boolean(&mut out, meta.controls);
    out.push(',');
    json::key(&mut out, "sample_interval_ms");
    json::uint(&mut out, millis_floor(meta.sample_interval));
    out.push(',');
    json::key(&mut out, "counts");
    out.push('{');
    for (i, (name, n)) in [
        ("tracked", tracked as u64),
        ("closed", counts.closed),
        ("open", counts.open),
        ("half_open", counts.half_open),
        ("forced", counts.forced),
        ("group_refused", counts.group_refused),
        ("healthy", counts.healthy),
        ("degraded", counts.degraded),
        ("unhealthy", counts.unhealthy),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        json::key(&mut out, name);
        json::uint(&mut out, n);
    }
    out.push_str("},");
    json::key(&mut out, "matched");
    json::uint(&mut out, matched as u64);
    out.push(',');
    json::key(&mut out, "offset");
    json::uint(&mut out, query.offset as u64);
    out.push(',');
    json::key(&mut out, "limit");
    json::uint(&mut out, query.limit as u64);
    out.push(',');
    json::key(&mut out, "tools");
    out.push('[');
    for (i, s) in page.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_tool(&mut out, s, &history, now, &groups.verdict(s));
    }
    out.push_str("],");
    json::key(&mut out, "group_noun");
    if groups.noun.is_empty() {
        out.push_str("null");
    } else {
        json::string(&mut out, groups.noun);
    }
    out.push(',');
    json::key(&mut out, "groups");
    out.push('[');
    for (i, g) in groups.list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_group(&mut out, g, &tallies[i]);
    }
    out.push_str("],");
    json::key(&mut out, "recent_transitions");
    out.push('[');
    for (i, t) in history.recent().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_transition(&mut out, t, true);
    }
    out.push_str("]}");
    out
}

/// One tool's object (`GET /tools/{tool}`), `None` for a tool not tracked.
pub(super) fn tool_json(
    registry: &ToolHealthRegistry,
    history: &history::History,
    tool: &str,
    meta: &Meta,
) -> Option<String> {
    let now = registry.now();
    let s = registry.snapshot(tool)?;
    let history = history.lock();
    let mut out = String::with_capacity(640);
    write_tool(&mut out, &s, &history, now, &meta.groups.verdict(&s));
    Some(out)
}

/// One tool's object as [`tool_json`] writes it, without a history (`rates` null,
/// `score_history` and `transitions` empty): for routes that keep none (the receiver's gate).
#[cfg(feature = "receiver")]
pub(crate) fn tool_object(registry: &ToolHealthRegistry, tool: &str) -> Option<String> {
    let now = registry.now();
    let s = registry.snapshot(tool)?;
    let none = history::History::new(2);
    let none = none.lock();
    let no_groups = Groups::default();
    let mut out = String::with_capacity(640);
    write_tool(&mut out, &s, &none, now, &no_groups.verdict(&s));
    Some(out)
}

/// The object of a tool never seen: fresh (closed, healthy, available) and `"tracked":
/// false`, in the shape of a tracked tool's. What the advisory gates (the receiver's and
/// `tool-health-gateway`'s) answer, with a `404`, for a name they know nothing of: reading it
/// creates nothing.
pub fn untracked_tool_json(tool: &str) -> String {
    let mut out = String::with_capacity(420 + tool.len());
    out.push('{');
    json::key(&mut out, "tool");
    json::string(&mut out, tool);
    out.push_str(concat!(
        r#","tracked":false,"state":"closed","breaker":"closed","status":"healthy","#,
        r#""available":true,"retry_after_ms":null,"refused_by":null,"group":null,"#,
        r#""control":"normal","#,
        r#""control_remaining_ms":null,"shadow":false,"score":1,"success_rate":1,"#,
        r#""ewma_success":1,"consecutive_failures":0,"calls":{"success":0,"failure":0,"#,
        r#""refused":0,"ignored":0,"cancelled":0,"shadow_refused":0},"#,
        r#""duration_ms":{"avg":0,"max":0},"rates":null,"score_history":[],"transitions":[]}"#,
    ));
    out
}

/// A group's object.
fn write_group(out: &mut String, g: &Group, (tracked, open): &(u64, u64)) {
    out.push('{');
    json::key(out, "name");
    json::string(out, &g.name);
    out.push_str(",\"state\":");
    json::string(out, g.state);
    out.push_str(",\"available\":");
    json::boolean(out, g.retry_after.is_none());
    out.push_str(",\"retry_after_ms\":");
    match g.retry_after {
        Some(d) if d != Duration::MAX => json::uint(out, millis_ceil(d)),
        _ => out.push_str("null"),
    }
    out.push_str(",\"connected\":");
    json::or_null(out, g.connected, json::boolean);
    out.push_str(",\"restarts\":");
    json::or_null(out, g.restarts, json::uint);
    out.push_str(",\"last_error\":");
    json::or_null(out, g.last_error.as_deref(), json::string);
    out.push_str(",\"tools\":");
    json::or_null(out, g.tools, json::uint);
    out.push_str(",\"tools_tracked\":");
    json::uint(out, *tracked);
    out.push_str(",\"tools_refusing\":");
    json::uint(out, *open);
    out.push('}');
}

fn millis_floor(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn write_tool(
    out: &mut String,
    s: &ToolHealthSnapshot,
    h: &HistoryInner,
    now: Duration,
    verdict: &Verdict<'_>,
) {
    let h = h.tool(&s.tool);
    out.push('{');
    json::key(out, "tool");
    json::string(out, &s.tool);
    out.push_str(",\"state\":");
    json::fixed(out, shown_state(s));
    out.push_str(",\"breaker\":");
    json::fixed(out, s.breaker.as_str());
    out.push_str(",\"status\":");
    json::fixed(out, s.status.as_str());
    // Available and until when: the tool's own breaker and its group's.
    out.push_str(",\"available\":");
    json::boolean(out, verdict.retry_after.is_none());
    out.push_str(",\"retry_after_ms\":");
    match verdict.retry_after {
        Some(d) if d != Duration::MAX => json::uint(out, millis_ceil(d)),
        _ => out.push_str("null"),
    }
    out.push_str(",\"refused_by\":");
    json::or_null(out, verdict.refused_by, json::string);
    out.push_str(",\"group\":");
    json::or_null(out, verdict.group.map(|g| &*g.name), json::string);
    out.push_str(",\"control\":");
    let (control, remaining) = match s.control {
        ToolControl::ForcedOpen { until } => ("forced_open", until.map(|u| u.saturating_sub(now))),
        ToolControl::ForcedClosed => ("forced_closed", None),
        _ => ("normal", None),
    };
    json::fixed(out, control);
    out.push_str(",\"control_remaining_ms\":");
    match remaining {
        Some(d) => json::uint(out, millis_ceil(d)),
        None => out.push_str("null"),
    }
    out.push_str(",\"shadow\":");
    json::boolean(out, s.shadow);
    out.push_str(",\"score\":");
    json::number(out, s.score, 4);
    out.push_str(",\"success_rate\":");
    json::number(out, s.success_rate, 4);
    out.push_str(",\"ewma_success\":");
    json::number(out, s.ewma_success, 4);
    out.push_str(",\"consecutive_failures\":");
    json::uint(out, s.consecutive_failures);
    out.push_str(",\"calls\":");
    out.push('{');
    for (i, (name, n)) in [
        ("success", s.success_count),
        ("failure", s.failure_count),
        ("refused", s.refused_count),
        ("ignored", s.ignored_count),
        ("cancelled", s.cancelled_count),
        ("shadow_refused", s.shadow_refused_count),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        json::key(out, name);
        json::uint(out, n);
    }
    out.push_str("},\"duration_ms\":");
    out.push('{');
    json::key(out, "avg");
    json::number(out, s.avg_duration.as_secs_f64() * 1e3, 3);
    out.push_str(",\"max\":");
    json::number(out, s.max_duration.as_secs_f64() * 1e3, 3);
    out.push_str("},\"rates\":");
    match h.and_then(|h| h.rates()) {
        Some(r) => {
            out.push('{');
            json::key(out, "calls");
            json::number(out, r.calls, 3);
            out.push_str(",\"failures\":");
            json::number(out, r.failures, 3);
            out.push_str(",\"refusals\":");
            json::number(out, r.refusals, 3);
            out.push('}');
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"score_history\":");
    out.push('[');
    for (i, p) in h.into_iter().flat_map(|h| h.scores()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::percent(out, p);
    }
    out.push_str("],\"transitions\":");
    out.push('[');
    for (i, t) in h.into_iter().flat_map(|h| h.transitions()).enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_transition(out, t, false);
    }
    out.push_str("]}");
}

/// A transition's object (the stream's `transition` event carries the tool too).
pub(super) fn write_transition(out: &mut String, t: &TransitionRecord, with_tool: bool) {
    out.push('{');
    if with_tool {
        json::key(out, "tool");
        json::string(out, &t.tool);
        out.push(',');
    }
    json::key(out, "from");
    json::fixed(out, t.transition.from.as_str());
    out.push(',');
    json::key(out, "to");
    json::fixed(out, t.transition.to.as_str());
    out.push(',');
    json::key(out, "reason");
    json::fixed(out, history::reason_code(t.transition.reason));
    out.push(',');
    json::key(out, "reason_text");
    json::string(out, t.transition.reason.as_str());
    out.push(',');
    json::key(out, "at_ms");
    json::uint(out, millis_floor(t.at));
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_and_errors_name_the_parameter() {
        assert_eq!(ToolsQuery::parse("").unwrap(), ToolsQuery::default());
        let q =
            ToolsQuery::parse("filter=a%2Fb+c&state=open&sort=name&offset=5&limit=0&x=1").unwrap();
        assert_eq!(q.filter, "a/b c");
        assert_eq!(q.state, StateFilter::Open);
        assert_eq!(q.sort, Sort::Name);
        assert_eq!((q.offset, q.limit), (5, 0));
        for (query, parameter) in [
            ("limit=10001", "limit"),
            ("limit=-1", "limit"),
            ("offset=x", "offset"),
            ("state=broken", "state"),
            ("sort=up", "sort"),
        ] {
            let e = ToolsQuery::parse(query).unwrap_err();
            assert_eq!(e.parameter, parameter, "{query}");
            assert!(e.to_string().contains(parameter));
        }
        let long = format!("filter={}", "a".repeat(MAX_FILTER_LEN + 1));
        assert_eq!(ToolsQuery::parse(&long).unwrap_err().parameter, "filter");
    }

    #[test]
    fn filter_is_ascii_case_insensitive() {
        assert!(contains_ignore_ascii_case("Web_Search", "search"));
        assert!(contains_ignore_ascii_case("x", ""));
        assert!(!contains_ignore_ascii_case("se", "search"));
    }

    #[test]
    fn countdowns_round_up() {
        assert_eq!(millis_ceil(Duration::from_micros(1)), 1);
        assert_eq!(millis_ceil(Duration::from_millis(7)), 7);
        assert_eq!(millis_ceil(Duration::from_micros(7_001)), 8);
        assert_eq!(millis_ceil(Duration::MAX), u64::MAX);
    }
}
