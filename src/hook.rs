//! The span-binding hook: how the gate reaches a tracing layer without naming it.
//!
//! The registry sits below the tracing layer and never names it. Instead, the way `tracing`
//! itself dispatches, the layer installs a function here when it is attached to a subscriber
//! ([`install_binder`]), and the gate calls [`bind`] after every decision. Until a layer is
//! attached anywhere in the process, [`bind`] is one load.
//!
//! [`CallingOut`] marks a thread that is running code on the crate's behalf (observers, the
//! classifier, OpenTelemetry annotations): the layer ignores spans and events created there, so
//! an observer that logs never fails a healthy tool's span nor recurses into the layer.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::call::GateDecision;

/// Binds a gate decision to the current tool span: the registry's address (to check that the
/// layer feeds this very registry), the requested tool name and the decision.
pub(crate) type Binder = fn(registry: usize, tool: &str, decision: &GateDecision);

/// The binder of the first layer attached in the process; never replaced (every layer installs
/// the same function: it finds the right layer through the current dispatcher).
static BINDER: OnceLock<Binder> = OnceLock::new();

/// Set once a binder is installed; never cleared. The gate's whole cost while no layer is
/// attached: one relaxed load.
///
/// Relaxed is enough: a layer is attached before its subscriber becomes anyone's default
/// (and making it the default synchronises), and a gate call that races the very first
/// installation merely stays unbound, which is what it would be a moment earlier. The binder
/// itself is read through the `OnceLock`, which synchronises on its own.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the layer's binder (idempotent).
pub(crate) fn install_binder(binder: Binder) {
    let _ = BINDER.set(binder);
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Called by the gate after every decision: binds it to the current tool span, if a layer is
/// attached. `registry` is the deciding registry's address.
#[inline(always)]
pub(crate) fn bind(registry: usize, tool: &str, decision: &GateDecision) {
    if INSTALLED.load(Ordering::Relaxed) {
        bind_installed(registry, tool, decision);
    }
}

#[inline(never)]
fn bind_installed(registry: usize, tool: &str, decision: &GateDecision) {
    if let Some(binder) = BINDER.get() {
        binder(registry, tool, decision);
    }
}

thread_local! {
    /// Set while the crate calls out (registry observers, the layer's classifier, OpenTelemetry)
    /// on this thread.
    static CALLING_OUT: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as calling out until dropped.
#[derive(Debug)]
pub(crate) struct CallingOut(bool);

impl CallingOut {
    pub(crate) fn enter() -> Self {
        Self(CALLING_OUT.try_with(|c| c.replace(true)).unwrap_or(false))
    }

    /// Whether this thread is calling out now.
    pub(crate) fn active() -> bool {
        CALLING_OUT.try_with(Cell::get).unwrap_or(false)
    }
}

impl Drop for CallingOut {
    fn drop(&mut self) {
        let _ = CALLING_OUT.try_with(|c| c.set(self.0));
    }
}
