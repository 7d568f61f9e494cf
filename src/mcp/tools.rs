//! The tool list as the model should see it: without the tools that refuse now, and a
//! subscription that says when to list again.
//!
//! A tool whose breaker is open is left out of [`ToolHealthClient::list_tools`]
//! (super::ToolHealthClient::list_tools) (every tool, while the server's breaker is open), and
//! named in [`ToolList::hidden`] with when it comes back. A tool nobody is offered is never
//! called, so the end of a cooldown — no transition: the breaker only moves at the next call —
//! would go unnoticed and the tool would stay hidden for ever. The subscription
//! ([`ToolHealthClient::on_tools_changed`](super::ToolHealthClient::on_tools_changed)) runs a
//! timer for every hidden tool on the **registry's clock**: it wakes at the cooldown's end (in
//! real time with the system clock; at the [`ManualClock`](crate::ManualClock) advance that
//! reaches it in tests), checks the gate's pure oracle, and says the tool is listed again. The
//! next call is then the probe. An operator control is no transition either: the subscription
//! hears it through [`HealthObserver::on_control`], reads the tool, and a tool (or server)
//! forced open for a while is listed again when its time is over, the same way.

use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::model::ListToolsResult;
use tokio::sync::mpsc;

use crate::breaker::{BreakerState, Transition, TransitionReason};
use crate::clock::Clock;
use crate::registry::{HealthObserver, ToolHealthRegistry};

/// What [`list_tools`](super::ToolHealthClient::list_tools) answers: the server's list without
/// the tools that refuse now, and those left out.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolList {
    /// The server's answer (cursor, cache hints, …) with only the tools a call would reach now.
    pub result: ListToolsResult,
    /// The tools left out, in the server's order: whose breaker (or whose server's) refuses now.
    pub hidden: Vec<HiddenTool>,
}

/// A tool [`list_tools`](super::ToolHealthClient::list_tools) left out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HiddenTool {
    /// The tool's name, as the server lists it.
    pub name: String,
    /// Its registry key (`{server}/{tool}`).
    pub key: String,
    /// Whose breaker refuses it.
    pub by: HiddenBy,
    /// How long until a call could be admitted again (`Duration::MAX`: not in any foreseeable
    /// time, e.g. forced open), as the gate's refusal would say now.
    pub retry_after: Duration,
    /// The same instant on the registry's clock ([`ToolHealthRegistry::now`]): until when.
    pub until: Duration,
}

/// Whose breaker left a tool out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HiddenBy {
    /// The tool's own.
    Tool,
    /// The server's: every tool of it is left out.
    Server,
}

/// A change of what [`list_tools`](super::ToolHealthClient::list_tools) would list, told to a
/// subscriber ([`on_tools_changed`](super::ToolHealthClient::on_tools_changed)): list the tools
/// again (for a host: send `notifications/tools/list_changed`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolsChanged {
    /// A breaker opened: `tool` (`None`: every tool of the server) leaves the list for
    /// `retry_after`.
    Hidden {
        /// The tool's name, or `None` for the server's breaker.
        tool: Option<String>,
        /// How long until it is listed again (`Duration::MAX`: not in any foreseeable time).
        retry_after: Duration,
    },
    /// A cooldown ended, or the breaker closed: `tool` (`None`: the server's tools) is listed
    /// again. After a cooldown the next call is the probe.
    Listed {
        /// The tool's name, or `None` for the server's breaker.
        tool: Option<String>,
    },
    /// The server said its tool list changed
    /// ([`server_list_changed`](super::ToolHealthClient::server_list_changed)).
    ServerList,
}

/// The callback of a subscription.
pub(crate) type OnChange = Arc<dyn Fn(&ToolsChanged) + Send + Sync>;

/// What the observers and the client send to a subscription's task.
#[derive(Debug)]
pub(crate) enum Event {
    /// A breaker of this server (`None`) or of its tool `Some(key)` moved.
    Moved {
        key: Option<String>,
        to: BreakerState,
        reason: TransitionReason,
    },
    /// An operator control changed a breaker of this server (`None`) or of its tool
    /// `Some(key)`: no transition, so the task reads it again.
    Controlled { key: Option<String> },
    /// The server said its list changed.
    ServerList,
}

/// A live subscription: dropping it stops the timers and unhooks the observers.
pub struct ToolsSubscription {
    task: tokio::task::JoinHandle<()>,
    hooks: Vec<(Arc<ToolHealthRegistry>, Arc<dyn HealthObserver>)>,
}

impl fmt::Debug for ToolsSubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolsSubscription")
            .field("running", &!self.task.is_finished())
            .finish_non_exhaustive()
    }
}

impl Drop for ToolsSubscription {
    fn drop(&mut self) {
        self.task.abort();
        for (registry, observer) in &self.hooks {
            registry.remove_transition_observer(observer);
        }
    }
}

/// Forwards the transitions of one server's breakers to a subscription's task.
struct Forward {
    /// `Some("{server}/")` on the tools' registry, `None` on the servers'.
    prefix: Option<String>,
    server: Arc<str>,
    tx: mpsc::UnboundedSender<Event>,
}

impl fmt::Debug for Forward {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Forward")
            .field("prefix", &self.prefix)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Forward {
    /// `Some(key)` for a name this subscription watches (`Some(None)`: the server's).
    fn watched(&self, name: &str) -> Option<Option<String>> {
        match &self.prefix {
            Some(prefix) if name.starts_with(prefix.as_str()) => Some(Some(name.to_owned())),
            None if name == &*self.server => Some(None),
            _ => None,
        }
    }
}

impl HealthObserver for Forward {
    fn on_transition(&self, name: &str, t: &Transition, _at: Duration) {
        if let Some(key) = self.watched(name) {
            let _ = self.tx.send(Event::Moved {
                key,
                to: t.to,
                reason: t.reason,
            });
        }
    }

    fn on_control(&self, name: &str, _at: Duration) {
        if let Some(key) = self.watched(name) {
            let _ = self.tx.send(Event::Controlled { key });
        }
    }
}

/// Everything a subscription's task reads.
pub(crate) struct Watch {
    pub(crate) tools: Arc<ToolHealthRegistry>,
    pub(crate) servers: Arc<ToolHealthRegistry>,
    pub(crate) server: Arc<str>,
    pub(crate) on_change: OnChange,
}

/// Starts a subscription on the current tokio runtime: hooks the observers, and spawns the task
/// that calls `watch.on_change`. `senders` gets the task's sender (for
/// [`Event::ServerList`]).
pub(crate) fn subscribe(
    watch: Watch,
    senders: &Mutex<Vec<mpsc::UnboundedSender<Event>>>,
) -> Result<ToolsSubscription, tokio::runtime::TryCurrentError> {
    let runtime = tokio::runtime::Handle::try_current()?;
    let (tx, rx) = mpsc::unbounded_channel();
    let prefix = format!("{}{}", watch.server, super::KEY_SEPARATOR);
    let on_tools: Arc<dyn HealthObserver> = Arc::new(Forward {
        prefix: Some(prefix.clone()),
        server: Arc::clone(&watch.server),
        tx: tx.clone(),
    });
    let on_server: Arc<dyn HealthObserver> = Arc::new(Forward {
        prefix: None,
        server: Arc::clone(&watch.server),
        tx: tx.clone(),
    });
    watch.tools.add_transition_observer(Arc::clone(&on_tools));
    watch
        .servers
        .add_transition_observer(Arc::clone(&on_server));
    {
        let mut senders = senders.lock().unwrap_or_else(PoisonError::into_inner);
        senders.retain(|s| !s.is_closed());
        senders.push(tx);
    }
    let hooks = vec![
        (Arc::clone(&watch.tools), on_tools),
        (Arc::clone(&watch.servers), on_server),
    ];
    let task = runtime.spawn(run(watch, prefix, rx));
    Ok(ToolsSubscription { task, hooks })
}

/// The subscription's task: applies events, and wakes at each hidden breaker's cooldown end.
async fn run(watch: Watch, prefix: String, mut rx: mpsc::UnboundedReceiver<Event>) {
    let clock = Arc::clone(watch.tools.clock());
    // Hidden now, by key (`None`: the server): when the gate could admit again.
    let mut hidden: HashMap<Option<String>, Option<Duration>> = HashMap::new();
    // What is hidden already when the subscription starts: its cooldowns are watched too.
    for t in watch.tools.unavailable_tools() {
        if t.tool.starts_with(&prefix) {
            hidden.insert(Some(t.tool), deadline(&*clock, t.retry_after));
        }
    }
    if let Some(retry_after) = refused_for(&watch, None) {
        hidden.insert(None, deadline(&*clock, retry_after));
    }
    loop {
        let next = hidden.values().flatten().min().copied();
        let mut sleep = next.map(|at| ClockSleep::new(Arc::clone(&clock), at));
        let woke = poll_fn(|cx| {
            if let Poll::Ready(event) = rx.poll_recv(cx) {
                return Poll::Ready(Some(event));
            }
            match sleep.as_mut().map(|s| Pin::new(s).poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(None),
                _ => Poll::Pending,
            }
        })
        .await;
        match woke {
            // Every sender is gone: the client and its observers are dropped.
            Some(None) => return,
            Some(Some(Event::ServerList)) => (watch.on_change)(&ToolsChanged::ServerList),
            // A control: hidden (until its end, when it has one) or listed, as a read says.
            Some(Some(Event::Controlled { key })) => {
                let tool = key.as_ref().map(|k| k[prefix.len()..].to_owned());
                match refused_for(&watch, key.as_deref()) {
                    Some(retry_after) => {
                        hidden.insert(key, deadline(&*clock, retry_after));
                        (watch.on_change)(&ToolsChanged::Hidden { tool, retry_after });
                    }
                    None => {
                        if hidden.remove(&key).is_some() {
                            (watch.on_change)(&ToolsChanged::Listed { tool });
                        }
                    }
                }
            }
            Some(Some(Event::Moved { key, to, reason })) => match (to, reason) {
                (BreakerState::Open, TransitionReason::ProbeReleased) => {}
                (BreakerState::Open, _) => {
                    let retry_after = refused_for(&watch, key.as_deref()).unwrap_or_default();
                    hidden.insert(key.clone(), deadline(&*clock, retry_after));
                    let tool = key.map(|k| k[prefix.len()..].to_owned());
                    (watch.on_change)(&ToolsChanged::Hidden { tool, retry_after });
                }
                (BreakerState::Closed, _) => {
                    if hidden.remove(&key).is_some() {
                        let tool = key.map(|k| k[prefix.len()..].to_owned());
                        (watch.on_change)(&ToolsChanged::Listed { tool });
                    }
                }
                (BreakerState::HalfOpen, _) => {}
            },
            None => {
                // A cooldown ended: listed again if the gate agrees, else watched anew (a
                // later failure or a Retry-After floor moved the instant).
                let now = clock.now();
                let due: Vec<Option<String>> = hidden
                    .iter()
                    .filter(|(_, at)| at.is_some_and(|at| at <= now))
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in due {
                    match refused_for(&watch, key.as_deref()) {
                        Some(retry_after) => {
                            hidden.insert(key, deadline(&*clock, retry_after));
                        }
                        None => {
                            hidden.remove(&key);
                            let tool = key.map(|k| k[prefix.len()..].to_owned());
                            (watch.on_change)(&ToolsChanged::Listed { tool });
                        }
                    }
                }
            }
        }
    }
}

/// How long the gate refuses `key` (`None`: the server) now, or `None` when it admits.
fn refused_for(watch: &Watch, key: Option<&str>) -> Option<Duration> {
    let snapshot = match key {
        Some(key) => watch.tools.snapshot(key),
        None => watch.servers.snapshot(&watch.server),
    };
    snapshot.and_then(|s| s.retry_after)
}

/// The instant `retry_after` from now on `clock`; `None` for "not in any foreseeable time".
fn deadline(clock: &dyn Clock, retry_after: Duration) -> Option<Duration> {
    (retry_after != Duration::MAX).then(|| clock.now().saturating_add(retry_after))
}

/// Completes once `clock` reads `at` or later: sleeps in real time for what is left, and wakes
/// at once when a clock moved by hand ([`Clock::wake_when_moved`]) jumps.
struct ClockSleep {
    clock: Arc<dyn Clock>,
    at: Duration,
    real: Pin<Box<tokio::time::Sleep>>,
}

impl ClockSleep {
    fn new(clock: Arc<dyn Clock>, at: Duration) -> Self {
        let left = at.saturating_sub(clock.now());
        Self {
            clock,
            at,
            real: Box::pin(tokio::time::sleep(left)),
        }
    }
}

impl Future for ClockSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            // Registered before the reading: a move between the two still wakes this task.
            let _ = self.clock.wake_when_moved(cx.waker());
            let now = self.clock.now();
            if now >= self.at {
                return Poll::Ready(());
            }
            if self.real.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The real sleep ended before the clock got there (a clock that moves by hand, or
            // one that runs a little behind tokio's): sleep again for what is left.
            let left = self.at - now;
            let deadline = tokio::time::Instant::now() + left;
            self.real.as_mut().reset(deadline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// A subscription on a registry driven by `clock`, its changes on a channel.
    fn watched(
        clock: &ManualClock,
    ) -> (
        Arc<ToolHealthRegistry>,
        ToolsSubscription,
        mpsc::UnboundedReceiver<ToolsChanged>,
    ) {
        let tools = Arc::new(ToolHealthRegistry::builder().clock(clock.clone()).build());
        let servers = Arc::clone(super::super::server_registry(&tools));
        let (tx, rx) = mpsc::unbounded_channel();
        let sub = subscribe(
            Watch {
                tools: Arc::clone(&tools),
                servers,
                server: "gh".into(),
                on_change: Arc::new(move |c: &ToolsChanged| {
                    let _ = tx.send(c.clone());
                }),
            },
            &Mutex::new(Vec::new()),
        )
        .expect("a runtime");
        (tools, sub, rx)
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<ToolsChanged>) -> ToolsChanged {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a change in time")
            .expect("the subscription runs")
    }

    #[tokio::test]
    async fn a_tool_or_server_forced_open_for_a_while_is_listed_again_when_its_time_is_over() {
        let clock = ManualClock::new();
        let (tools, _sub, mut rx) = watched(&clock);
        tools.force_open_for("gh/search", Duration::from_secs(30));
        assert_eq!(
            next(&mut rx).await,
            ToolsChanged::Hidden {
                tool: Some("search".into()),
                retry_after: Duration::from_secs(30)
            }
        );
        clock.advance(Duration::from_secs(29));
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "not before its time");
        // No call: the end of the isolation alone lists it again.
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            next(&mut rx).await,
            ToolsChanged::Listed {
                tool: Some("search".into())
            }
        );
        let servers = super::super::server_registry(&tools);
        servers.force_open_for("gh", Duration::from_secs(60));
        assert!(matches!(
            next(&mut rx).await,
            ToolsChanged::Hidden { tool: None, .. }
        ));
        // Released by hand before its end: listed at once.
        servers.release_control("gh");
        assert_eq!(next(&mut rx).await, ToolsChanged::Listed { tool: None });
        // Forced open until released: hidden, with no end to wait for.
        tools.force_open("gh/search");
        assert_eq!(
            next(&mut rx).await,
            ToolsChanged::Hidden {
                tool: Some("search".into()),
                retry_after: Duration::MAX
            }
        );
        tools.release_control("gh/search");
        assert_eq!(
            next(&mut rx).await,
            ToolsChanged::Listed {
                tool: Some("search".into())
            }
        );
    }

    #[tokio::test]
    async fn a_clock_sleep_ends_when_a_manual_clock_reaches_it_without_real_time() {
        let clock = ManualClock::new();
        let sleep = ClockSleep::new(Arc::new(clock.clone()), Duration::from_secs(30));
        let task = tokio::spawn(sleep);
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(29));
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "29 s of 30");
        clock.advance(Duration::from_secs(1));
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("woken by the advance")
            .expect("no panic");
    }
}
