//! Groups of tools the page shows beside them: what a tool is reached through, when that can
//! refuse every tool of it at once — a gateway's MCP servers. The application that knows them
//! fills them ([`StatusBuilder::groups`](super::StatusBuilder::groups)); the page, `/tools`
//! and the stream show each group (its state, whether it is connected, restarts, its last
//! error) and count a tool its group refuses as refused, whatever its own breaker says.

use std::fmt;
use std::time::Duration;

use crate::breaker::BreakerState;
use crate::control::ToolControl;
use crate::registry::ToolHealthSnapshot;

/// One group of tools: a name, which tools belong to it (their registry keys begin with
/// [`prefix`](Self::prefix)), whether it refuses them now and what else the operator should
/// see. Build one with [`Group::new`] and its setters.
///
/// ```
/// use std::time::Duration;
/// use tool_health::status::Group;
///
/// let g = Group::new("github", "github/")
///     .connected(false)
///     .restarts(2)
///     .last_error("the connection ended");
/// assert_eq!(g.name, "github");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Group {
    /// Its name, shown as it is (escaped).
    pub name: String,
    /// The tools whose registry keys begin with it are the group's (the longest prefix wins
    /// when groups nest).
    pub prefix: String,
    /// Its state, in the tools' words: `closed`, `open`, `half_open`, `forced_open`,
    /// `forced_closed` (default `closed`).
    pub state: &'static str,
    /// How long it refuses its tools from now (`None`: it admits them; `Duration::MAX`: not
    /// in any foreseeable time).
    pub retry_after: Option<Duration>,
    /// Whether it is connected, when that means something.
    pub connected: Option<bool>,
    /// How many times it was started again, when it is restarted.
    pub restarts: Option<u64>,
    /// Why it last failed, for the operator.
    pub last_error: Option<String>,
    /// How many tools it offers, when known.
    pub tools: Option<u64>,
}

impl Group {
    /// A group named `name` of the tools whose keys begin with `prefix`: closed, admitting.
    pub fn new(name: impl Into<String>, prefix: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            prefix: prefix.into(),
            state: BreakerState::Closed.as_str(),
            retry_after: None,
            connected: None,
            restarts: None,
            last_error: None,
            tools: None,
        }
    }

    /// Its state and refusal from its breaker's snapshot (the gateway keeps a server's breaker
    /// in a registry of its own).
    #[must_use]
    pub fn breaker(mut self, snapshot: &ToolHealthSnapshot) -> Self {
        self.state = match snapshot.control {
            ToolControl::ForcedOpen { .. } => "forced_open",
            ToolControl::ForcedClosed => "forced_closed",
            _ => snapshot.breaker.as_str(),
        };
        self.retry_after = snapshot.retry_after;
        self
    }

    /// Whether it is connected.
    #[must_use]
    pub fn connected(mut self, connected: bool) -> Self {
        self.connected = Some(connected);
        self
    }

    /// How many times it was started again.
    #[must_use]
    pub fn restarts(mut self, restarts: u64) -> Self {
        self.restarts = Some(restarts);
        self
    }

    /// Why it last failed.
    #[must_use]
    pub fn last_error(mut self, error: impl Into<String>) -> Self {
        self.last_error = Some(error.into());
        self
    }

    /// How many tools it offers.
    #[must_use]
    pub fn tools(mut self, tools: u64) -> Self {
        self.tools = Some(tools);
        self
    }
}

/// Where the page gets the groups from: asked at each document (a `/tools` request, each
/// snapshot of the stream), so keep it cheap. Any `Fn() -> Vec<Group>` is one.
pub trait GroupSource: Send + Sync + 'static {
    /// Every group now, in the order to show them.
    fn groups(&self) -> Vec<Group>;
}

impl<F: Fn() -> Vec<Group> + Send + Sync + 'static> GroupSource for F {
    fn groups(&self) -> Vec<Group> {
        self()
    }
}

/// The groups of one document, with what they are called.
#[derive(Clone, Default)]
pub(super) struct Groups {
    /// What a group is (`server`): the page's word for it, and `refused_by`'s value.
    pub(super) noun: &'static str,
    pub(super) list: Vec<Group>,
}

impl fmt::Debug for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Groups")
            .field("noun", &self.noun)
            .field("groups", &self.list.len())
            .finish()
    }
}

impl Groups {
    /// The group `tool` belongs to: the longest prefix of its key.
    pub(super) fn of(&self, tool: &str) -> Option<&Group> {
        self.index_of(tool).map(|i| &self.list[i])
    }

    /// Its index in the list.
    pub(super) fn index_of(&self, tool: &str) -> Option<usize> {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.prefix.is_empty() && tool.starts_with(&g.prefix))
            .max_by_key(|(_, g)| g.prefix.len())
            .map(|(i, _)| i)
    }

    /// What a tool's document says about its availability, its group counted in.
    pub(super) fn verdict<'g>(&'g self, s: &ToolHealthSnapshot) -> Verdict<'g> {
        let group = self.of(&s.tool);
        let by_group = group.and_then(|g| g.retry_after);
        let retry_after = match (s.retry_after, by_group) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a),
            (Some(a), Some(b)) => Some(a.max(b)),
        };
        let refused_by = match (by_group, s.retry_after) {
            (Some(_), _) => Some(self.noun),
            (None, Some(_)) => Some("tool"),
            (None, None) => None,
        };
        Verdict {
            group,
            retry_after,
            refused_by,
        }
    }
}

/// A tool's availability with its group counted in.
#[derive(Debug, Clone, Copy)]
pub(super) struct Verdict<'g> {
    pub(super) group: Option<&'g Group>,
    /// How long it is refused from now (`None`: available).
    pub(super) retry_after: Option<Duration>,
    /// `tool`, the group's noun, or `None` when available.
    pub(super) refused_by: Option<&'static str>,
}

impl Verdict<'_> {
    /// Its own breaker admits it, its group does not.
    pub(super) fn refused_by_group(&self, own: &ToolHealthSnapshot) -> bool {
        own.retry_after.is_none() && self.group.is_some_and(|g| g.retry_after.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_an_empty_one_holds_nothing() {
        let groups = Groups {
            noun: "server",
            list: vec![
                Group::new("a", "a/"),
                Group::new("ab", "a/b/"),
                Group::new("all", ""),
            ],
        };
        assert_eq!(groups.of("a/x").map(|g| &*g.name), Some("a"));
        assert_eq!(groups.of("a/b/x").map(|g| &*g.name), Some("ab"));
        assert_eq!(groups.of("c/x").map(|g| &*g.name), None);
    }
}
