//! What each callsite can be, decided once per callsite and cached.
//!
//! [`CallsiteRole::of`] reads a callsite's static metadata (kind, level, target, declared
//! fields): a span callsite is matched against the layer's conventions once, and its role
//! remembers which one matched. [`CallsiteCache`] remembers the answer: a direct-mapped cache of atomic words keyed
//! by the metadata's address (no lock, no guard) in front of a lock-free map.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing_core::callsite::Identifier;
use tracing_core::{Level, Metadata};

use crate::semconv;

use crate::infer::conventions::{Convention, MAX_CONVENTIONS};

/// What a callsite can be: a set of bits, decided once per callsite.
///
/// A span callsite's byte is `TOOL_SPAN` plus, in the seven bits above it, the index of the
/// [`Convention`] that matched it. An event callsite's byte is a set of the event bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CallsiteRole(pub(crate) u8);

impl CallsiteRole {
    /// A span callsite that can be a tool span.
    pub(crate) const TOOL_SPAN: u8 = 1;
    /// An ERROR-level event from a target that is not excluded.
    pub(crate) const ERROR_EVENT: u8 = 1 << 2;
    /// An event with a `return` or `error` field: a completion marker.
    pub(crate) const MARKER_EVENT: u8 = 1 << 3;
    /// An event with an `error.type` field.
    pub(crate) const EVENT_ERROR_TYPE: u8 = 1 << 4;
    /// An event with an `error` field (any level) from a target that is not excluded: fails
    /// the tool span it is emitted directly in (`#[instrument(err(level = "warn"))]`).
    pub(crate) const ERROR_FIELD_EVENT: u8 = 1 << 5;
    /// An event that can be a convention's late failure verdict (its target and level fit):
    /// read when it is emitted in the parent of a call waiting for its verdict.
    pub(crate) const LATE_EVENT: u8 = 1 << 6;

    pub(crate) fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// The index of the convention a tool-span callsite matched.
    pub(crate) fn convention(self) -> usize {
        usize::from(self.0 >> 1)
    }

    /// Classifies a callsite: a span by the first of `conventions` that matches it.
    pub(crate) fn of(meta: &Metadata<'_>, conventions: &[Convention]) -> Self {
        let fields = meta.fields();
        let mut bits = 0;
        if meta.is_span() {
            let matched = conventions
                .iter()
                .take(MAX_CONVENTIONS)
                // The span processor's conventions: the layer cannot see their outcome.
                .position(|c| !c.is_sdk_only() && c.matches(meta));
            if let Some(index) = matched {
                bits = Self::TOOL_SPAN | ((index as u8) << 1);
            }
        } else if meta.is_event() {
            if *meta.level() == Level::ERROR && !excluded_target(meta.target()) {
                bits |= Self::ERROR_EVENT;
            }
            if fields.field(semconv::RETURN_FIELD).is_some()
                || fields.field(semconv::ERROR_FIELD).is_some()
            {
                bits |= Self::MARKER_EVENT;
            }
            if fields.field(semconv::ERROR_TYPE).is_some() {
                bits |= Self::EVENT_ERROR_TYPE;
            }
            if fields.field(semconv::ERROR_FIELD).is_some() && !excluded_target(meta.target()) {
                bits |= Self::ERROR_FIELD_EVENT;
            }
            let late = conventions.iter().take(MAX_CONVENTIONS).any(|c| {
                c.late_failure_event()
                    .is_some_and(|l| l.may_match(meta.target(), *meta.level()))
            });
            if late {
                bits |= Self::LATE_EVENT;
            }
        }
        Self(bits)
    }
}

/// Events from OpenTelemetry's own crates and from this crate never mark a tool span failed.
fn excluded_target(target: &str) -> bool {
    target.starts_with("opentelemetry")
        || target == "tool_health"
        || target.starts_with("tool_health::")
}

/// Slots of the direct-mapped cache in front of the map.
const FAST_SLOTS: usize = 1024;
/// The address bits a fast slot keeps (56: every user-space address of a 64-bit process; a
/// static's address never differs from another's only above them).
const FAST_ADDR_MASK: u64 = (1 << 56) - 1;

fn fast_slot(addr: u64) -> usize {
    // Metadata statics are at least 8-byte aligned and often close together: mix the bits.
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % FAST_SLOTS
}

/// How many callsites a layer remembers; past it, new callsites are classified on every use.
const MAX_CACHED_CALLSITES: usize = 65_536;

/// Callsite → role, remembered (see the module docs).
pub(crate) struct CallsiteCache {
    map: papaya::HashMap<Identifier, CallsiteRole, foldhash::fast::RandomState>,
    /// `(metadata address << 8) | role`, 0 when empty.
    fast: Box<[AtomicU64; FAST_SLOTS]>,
}

impl std::fmt::Debug for CallsiteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallsiteCache")
            .field("callsites", &self.map.len())
            .finish()
    }
}

impl CallsiteCache {
    pub(crate) fn new() -> Self {
        Self {
            map: papaya::HashMap::builder()
                .hasher(foldhash::fast::RandomState::default())
                .build(),
            fast: Box::new(std::array::from_fn(|_| AtomicU64::new(0))),
        }
    }

    /// The callsite's role; `classify` runs on the first sight of a callsite only.
    #[inline]
    pub(crate) fn role(
        &self,
        meta: &'static Metadata<'static>,
        classify: impl FnOnce(&Metadata<'_>) -> CallsiteRole,
    ) -> CallsiteRole {
        // The fast path: a direct-mapped cache of plain atomic words, keyed by the metadata's
        // address (one per callsite, static). No guard, no read-modify-write.
        let addr = meta as *const Metadata<'static> as usize as u64;
        let slot = &self.fast[fast_slot(addr)];
        let cached = slot.load(Ordering::Relaxed);
        if cached != 0 && cached >> 8 == addr & FAST_ADDR_MASK {
            return CallsiteRole((cached & 0xFF) as u8);
        }
        let role = self.role_slow(meta, classify);
        slot.store(
            ((addr & FAST_ADDR_MASK) << 8) | u64::from(role.0),
            Ordering::Relaxed,
        );
        role
    }

    #[inline(never)]
    fn role_slow(
        &self,
        meta: &'static Metadata<'static>,
        classify: impl FnOnce(&Metadata<'_>) -> CallsiteRole,
    ) -> CallsiteRole {
        let callsite = meta.callsite();
        let map = self.map.pin();
        if let Some(role) = map.get(&callsite) {
            return *role;
        }
        let role = classify(meta);
        if map.len() < MAX_CACHED_CALLSITES {
            map.insert(callsite, role);
        }
        role
    }
}
