//! History sampling: what the page shows beyond the registry's own reads — each tool's recent
//! scores (the sparkline), its calls, failures and refusals per second, and its last
//! transitions with their reasons.
//!
//! A sample reads every tracked tool once (the exporters' allocation-free visit), every
//! [`StatusBuilder::sample_interval`](super::StatusBuilder::sample_interval). Transitions
//! arrive from the registry's transition observer through the broadcast channel
//! (`events.rs`), never from the recording thread directly: the lock here is taken by the
//! status task and by readers building a response, never by a thread that records a call.
//!
//! The counts behind the rates are the registry's raw counters (resets ignored), so a
//! [`reset`](crate::ToolHealthRegistry::reset) does not show as a negative rate. Tools no
//! longer tracked (evicted) leave the history at the next sample.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::breaker::{Transition, TransitionReason};
use crate::registry::ToolHealthRegistry;

/// How many of the latest samples the rates are computed over (at most; fewer at first).
pub(super) const RATE_SAMPLES: usize = 5;
/// Transitions kept per tool.
pub(super) const TOOL_TRANSITIONS: usize = 5;
/// Transitions kept across all tools (the page's log).
pub(super) const RECENT_TRANSITIONS: usize = 50;

/// One transition, as the history keeps it and the stream sends it.
#[derive(Debug, Clone)]
pub(super) struct TransitionRecord {
    pub(super) tool: Arc<str>,
    pub(super) transition: Transition,
    /// The registry clock's reading.
    pub(super) at: Duration,
}

/// Calls, failures and refusals per second over the last few samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Rates {
    /// Calls that reached the tool (succeeded, failed, the caller's fault, cancelled).
    pub(super) calls: f64,
    /// Failed calls.
    pub(super) failures: f64,
    /// Calls the gate refused.
    pub(super) refusals: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    ran: u64,
    failures: u64,
    refusals: u64,
}

#[derive(Debug, Default)]
struct ToolHistory {
    /// Scores in percent, oldest first.
    scores: VecDeque<u8>,
    /// `(registry clock, counts)` of the latest samples, oldest first.
    counts: VecDeque<(Duration, Counts)>,
    /// The latest transitions, oldest first.
    transitions: VecDeque<TransitionRecord>,
    /// The sample round that last saw the tool.
    seen: u64,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    tools: HashMap<Arc<str>, ToolHistory, foldhash::fast::RandomState>,
    recent: VecDeque<TransitionRecord>,
    round: u64,
}

/// Every tool's recent history (see the module docs).
#[derive(Debug)]
pub(super) struct History {
    inner: Mutex<Inner>,
    /// Scores kept per tool.
    capacity: usize,
}

impl History {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding it leaves plain data behind: keep serving.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one sample of every tracked tool.
    pub(super) fn sample(&self, registry: &ToolHealthRegistry) {
        let at = registry.now();
        let mut inner = self.lock();
        inner.round += 1;
        let round = inner.round;
        let capacity = self.capacity;
        let Inner { tools, .. } = &mut *inner;
        registry.for_each_tool(|tool, view| {
            let score = view.stats().score();
            let raw = view.raw();
            let counts = Counts {
                ran: raw
                    .success
                    .saturating_add(raw.failure)
                    .saturating_add(raw.ignored)
                    .saturating_add(raw.cancelled),
                failures: raw.failure,
                refusals: raw.refused,
            };
            let h = match tools.get_mut(tool) {
                Some(h) => h,
                None => tools.entry(Arc::from(tool)).or_default(),
            };
            h.seen = round;
            if h.scores.len() == capacity {
                h.scores.pop_front();
            }
            h.scores.push_back(percent(score));
            if h.counts.len() > RATE_SAMPLES {
                h.counts.pop_front();
            }
            h.counts.push_back((at, counts));
        });
        tools.retain(|_, h| h.seen == round);
    }

    /// Keeps a transition (per tool and in the log across tools).
    pub(super) fn record_transition(&self, record: TransitionRecord) {
        let mut inner = self.lock();
        if inner.recent.len() == RECENT_TRANSITIONS {
            inner.recent.pop_front();
        }
        inner.recent.push_back(record.clone());
        let round = inner.round;
        let h = match inner.tools.get_mut(&*record.tool) {
            Some(h) => h,
            None => inner
                .tools
                .entry(Arc::clone(&record.tool))
                .or_insert_with(|| ToolHistory {
                    seen: round,
                    ..ToolHistory::default()
                }),
        };
        if h.transitions.len() == TOOL_TRANSITIONS {
            h.transitions.pop_front();
        }
        h.transitions.push_back(record);
    }
}

impl Inner {
    /// One tool's history (`None` before its first sample or transition).
    pub(super) fn tool(&self, tool: &str) -> Option<ToolView<'_>> {
        self.tools.get(tool).map(ToolView)
    }

    /// The latest transitions across tools, oldest first.
    pub(super) fn recent(&self) -> impl DoubleEndedIterator<Item = &TransitionRecord> {
        self.recent.iter()
    }
}

/// One tool's history, looked up once.
#[derive(Debug, Clone, Copy)]
pub(super) struct ToolView<'a>(&'a ToolHistory);

impl<'a> ToolView<'a> {
    /// The tool's scores in percent, oldest first.
    pub(super) fn scores(self) -> impl Iterator<Item = u8> + 'a {
        self.0.scores.iter().copied()
    }

    /// The tool's rates over the latest samples; `None` until two samples are apart in time.
    pub(super) fn rates(self) -> Option<Rates> {
        let (t0, first) = self.0.counts.front()?;
        let (t1, last) = self.0.counts.back()?;
        let secs = t1.saturating_sub(*t0).as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let per_second = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
        Some(Rates {
            calls: per_second(first.ran, last.ran),
            failures: per_second(first.failures, last.failures),
            refusals: per_second(first.refusals, last.refusals),
        })
    }

    /// The tool's latest transitions, oldest first.
    pub(super) fn transitions(self) -> impl Iterator<Item = &'a TransitionRecord> {
        self.0.transitions.iter()
    }
}

/// A score in `[0, 1]` as a whole percentage.
fn percent(score: f64) -> u8 {
    (score.clamp(0.0, 1.0) * 100.0).round() as u8
}

/// A reason's stable code (the JSON's `reason`; `reason_text` is the sentence).
pub(super) fn reason_code(reason: TransitionReason) -> &'static str {
    match reason {
        TransitionReason::Tripped => "tripped",
        TransitionReason::ProbeGranted => "probe_granted",
        TransitionReason::ProbeSucceeded => "probe_succeeded",
        TransitionReason::ProbeFailed => "probe_failed",
        TransitionReason::LeaseExpired => "lease_expired",
        TransitionReason::ProbeReleased => "probe_released",
        TransitionReason::RemoteOpen => "remote_open",
        TransitionReason::RemoteClose => "remote_close",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::BreakerState;

    #[test]
    fn rates_come_from_count_differences_over_the_latest_samples() {
        let clock = ManualClock::new();
        let registry = ToolHealthRegistry::builder().clock(clock.clone()).build();
        let history = History::new(3);
        registry.record_success("a", Duration::ZERO);
        history.sample(&registry);
        assert_eq!(
            history.lock().tool("a").and_then(|t| t.rates()),
            None,
            "one sample: no rate yet"
        );
        for _ in 0..4 {
            registry.record_success("a", Duration::ZERO);
        }
        registry.record_failure("a", Duration::ZERO);
        clock.advance(Duration::from_secs(2));
        history.sample(&registry);
        let rates = history.lock().tool("a").and_then(|t| t.rates()).unwrap();
        assert_eq!(
            rates,
            Rates {
                calls: 2.5,
                failures: 0.5,
                refusals: 0.0
            }
        );
        // A reset zeroes the snapshot, not the raw counts: no negative rate.
        registry.reset("a");
        clock.advance(Duration::from_secs(1));
        history.sample(&registry);
        assert_eq!(
            history
                .lock()
                .tool("a")
                .and_then(|t| t.rates())
                .unwrap()
                .calls,
            5.0 / 3.0
        );
        // The sparkline keeps `capacity` scores.
        clock.advance(Duration::from_secs(1));
        history.sample(&registry);
        assert_eq!(
            history
                .lock()
                .tool("a")
                .unwrap()
                .scores()
                .collect::<Vec<_>>(),
            [74, 100, 100]
        );
    }

    #[test]
    fn untracked_tools_leave_and_transitions_are_bounded() {
        let registry = ToolHealthRegistry::new();
        let history = History::new(60);
        registry.record_success("a", Duration::ZERO);
        history.sample(&registry);
        for i in 0..(RECENT_TRANSITIONS as u32 + 3) {
            history.record_transition(TransitionRecord {
                tool: Arc::from(if i % 2 == 0 { "a" } else { "b" }),
                transition: Transition {
                    from: BreakerState::Closed,
                    to: BreakerState::Open,
                    reason: TransitionReason::Tripped,
                },
                at: Duration::from_millis(u64::from(i)),
            });
        }
        let inner = history.lock();
        assert_eq!(inner.recent().count(), RECENT_TRANSITIONS);
        assert_eq!(inner.recent().last().unwrap().at, Duration::from_millis(52));
        assert_eq!(
            inner.tool("a").unwrap().transitions().count(),
            TOOL_TRANSITIONS
        );
        assert_eq!(
            inner.tool("a").unwrap().transitions().last().unwrap().at,
            Duration::from_millis(52)
        );
        drop(inner);
        // "b" is not tracked by the registry: the next sample drops it.
        history.sample(&registry);
        assert_eq!(
            history
                .lock()
                .tool("b")
                .map_or(0, |t| t.transitions().count()),
            0
        );
        assert_eq!(
            history.lock().tool("a").unwrap().transitions().count(),
            TOOL_TRANSITIONS
        );
    }
}
