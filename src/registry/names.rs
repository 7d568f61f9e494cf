//! Name → entry: which index a registry uses.
//!
//! By default the guard-free append-only [`Index`] (lookups are plain loads; see `index.rs`).
//! A registry built for idle eviction uses papaya instead, which can remove entries and
//! protects readers with an epoch guard (its cost per lookup is in BENCHMARKS.md).
//!
//! Also what a name may be ([`NameError`]: at most `max_name_len` bytes) and how a log message
//! shows one ([`Escaped`]).

use std::fmt;
use std::sync::Arc;

use super::entry::Entry;
use super::index::Index;

/// The evicting registry's map.
pub(super) type EvictableMap = papaya::HashMap<Box<str>, Arc<Entry>, foldhash::fast::RandomState>;

/// The registry's name index (see the module docs).
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "one per registry; boxing the index would add a load to every lookup"
)]
pub(super) enum NameIndex {
    /// Entries are never removed: lookups are plain loads.
    AppendOnly(Index<Entry>),
    /// Entries can be evicted: lookups pin an epoch.
    Evictable(EvictableMap),
}

impl NameIndex {
    pub(super) fn new(evictable: bool) -> Self {
        if evictable {
            Self::Evictable(
                papaya::HashMap::builder()
                    .hasher(foldhash::fast::RandomState::default())
                    .build(),
            )
        } else {
            Self::AppendOnly(Index::new())
        }
    }

    /// Runs `f` on the tool's entry. `f` has one call site, so it inlines into the caller's
    /// hot path; the evictable map hands out an owned `Arc` (two reference-count operations,
    /// part of the evictable registry's extra cost) so that no guard outlives the lookup.
    #[inline(always)]
    pub(super) fn with<R>(&self, tool: &str, f: impl FnOnce(&Arc<Entry>) -> R) -> Option<R> {
        let owned;
        let entry = match self {
            Self::AppendOnly(index) => index.get(tool)?,
            Self::Evictable(map) => {
                owned = map.pin().get(tool).cloned()?;
                &owned
            }
        };
        Some(f(entry))
    }

    /// The tool's entry, borrowed from the index, or (evictable map) from `slot`, which holds
    /// an owned `Arc` so that no guard outlives the lookup. No closure: the caller's hot path
    /// stays one function for the optimiser.
    #[inline(always)]
    pub(super) fn get<'a>(
        &'a self,
        tool: &str,
        slot: &'a mut Option<Arc<Entry>>,
    ) -> Option<&'a Arc<Entry>> {
        match self {
            Self::AppendOnly(index) => index.get(tool),
            Self::Evictable(map) => {
                *slot = map.pin().get(tool).cloned();
                slot.as_ref()
            }
        }
    }

    /// Inserts under the registry's insert lock (the caller holds it); `make` may refuse.
    pub(super) fn insert_with(
        &self,
        tool: &str,
        make: impl FnOnce() -> Option<Arc<Entry>>,
    ) -> Option<Arc<Entry>> {
        match self {
            Self::AppendOnly(index) => index.get_or_insert_with(tool, make),
            Self::Evictable(map) => {
                let map = map.pin();
                if let Some(e) = map.get(tool) {
                    return Some(Arc::clone(e));
                }
                let e = make()?;
                map.insert(tool.into(), Arc::clone(&e));
                Some(e)
            }
        }
    }

    pub(super) fn for_each(&self, f: impl FnMut(&Arc<Entry>)) {
        match self {
            Self::AppendOnly(index) => index.iter().for_each(f),
            Self::Evictable(map) => map.pin().values().for_each(f),
        }
    }
}

/// The longest tool name a registry takes unless told otherwise: 256 bytes (fleet mode's own
/// limit).
pub(super) const DEFAULT_MAX_NAME_LEN: usize = 256;

/// The most [`RegistryBuilder::max_name_len`](super::RegistryBuilder::max_name_len) may be set
/// to: 64 KiB.
pub(super) const MAX_NAME_LEN_LIMIT: usize = 64 * 1024;

/// A tool name the registry refuses: longer than its
/// [`max_name_len`](super::ToolHealthRegistry::max_name_len).
///
/// Tool names come from the model: a name this long is no tool of the application's. It is
/// refused by every entry point without being copied — the gate refuses the call
/// ([`try_check`](super::ToolHealthRegistry::try_check) says why), a record is not taken
/// ([`NotRecorded::InvalidName`](crate::NotRecorded::InvalidName)), the call helper answers
/// [`CallError::InvalidName`](crate::CallError::InvalidName) without calling the tool — and
/// counted in [`OverflowStats::rejected_names`](crate::observe::OverflowStats::rejected_names).
/// Its text is for the model: an invalid argument, never the breaker's refusal.
///
/// ```
/// use tool_health::ToolHealthRegistry;
///
/// let registry = ToolHealthRegistry::new();
/// let invented = "x".repeat(1000);
/// let err = registry.validate_name(&invented).unwrap_err();
/// assert_eq!(err.to_string(), "invalid tool name: 1000 bytes, longer than the 256 allowed");
/// assert!(!registry.allow_request(&invented));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NameError {
    len: usize,
    max: usize,
}

impl NameError {
    /// `Ok` when a name of `len` bytes fits within `max`.
    #[inline]
    pub(super) fn check(len: usize, max: usize) -> Result<(), NameError> {
        if len <= max {
            Ok(())
        } else {
            Err(NameError { len, max })
        }
    }

    /// The refused name's length in bytes.
    #[allow(
        clippy::len_without_is_empty,
        reason = "the length of a name too long: never empty"
    )]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The longest name the registry takes, in bytes.
    pub fn max(&self) -> usize {
        self.max
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid tool name: {} bytes, longer than the {} allowed",
            self.len, self.max
        )
    }
}

impl std::error::Error for NameError {}

/// A tool name as a log message shows it: control characters, quotes and backslashes escaped
/// (Rust's `escape_debug`), and every character that shows nothing — bidirectional controls,
/// zero-width characters, variation selectors, tags, fillers: Unicode's default-ignorable code
/// points ([`Escaped::is_hidden`]) — escaped as `\u{…}` too, so that a name can never write a
/// line, a colour, a fake field, text that reads in another order, or text that hides another
/// in a log. Structured fields need no such care for lines and colours: `tracing`'s
/// formatters escape those.
///
/// ```
/// use tool_health::observe::Escaped;
///
/// assert_eq!(Escaped("search\u{202e}txt.exe").to_string(), "search\\u{202e}txt.exe");
/// assert_eq!(Escaped("a\u{200b}b\u{fe0f}").to_string(), "a\\u{200b}b\\u{fe0f}");
/// assert_eq!(Escaped("café \"x\"").to_string(), "café \\\"x\\\"");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

impl Escaped<'_> {
    /// Whether a log line shows `c` escaped although `escape_debug` may leave it: a control
    /// character, a line or paragraph separator, or a default-ignorable code point (it renders
    /// as nothing, or changes how the text around it reads).
    pub fn is_hidden(c: char) -> bool {
        c.is_control()
            || matches!(
                c,
                '\u{00AD}'
                    | '\u{034F}'
                    | '\u{061C}'
                    | '\u{115F}'..='\u{1160}'
                    | '\u{17B4}'..='\u{17B5}'
                    | '\u{180B}'..='\u{180F}'
                    | '\u{200B}'..='\u{200F}'
                    | '\u{2028}'..='\u{202E}'
                    | '\u{2060}'..='\u{206F}'
                    | '\u{3164}'
                    | '\u{FE00}'..='\u{FE0F}'
                    | '\u{FEFF}'
                    | '\u{FFA0}'
                    | '\u{FFF0}'..='\u{FFF8}'
                    | '\u{1BCA0}'..='\u{1BCA3}'
                    | '\u{1D173}'..='\u{1D17A}'
                    | '\u{E0000}'..='\u{E0FFF}'
            )
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Runs of what `escape_debug` shows well, each hidden character between them escaped.
        let mut rest = self.0;
        while let Some((i, c)) = rest.char_indices().find(|&(_, c)| Self::is_hidden(c)) {
            fmt::Display::fmt(&rest[..i].escape_debug(), f)?;
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[i + c.len_utf8()..];
        }
        fmt::Display::fmt(&rest.escape_debug(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_message_shows_a_name_escaped() {
        let shown = Escaped("a\nb\x1b[31m\t\u{202e}\"`\\é").to_string();
        assert_eq!(shown, "a\\nb\\u{1b}[31m\\t\\u{202e}\\\"`\\\\é");
        assert!(!shown.contains(['\n', '\x1b', '\u{202e}']));
    }

    #[test]
    fn nothing_that_shows_nothing_passes_a_log_message() {
        // What `escape_debug` alone let through, each between two letters.
        for c in [
            '\u{034F}',  // combining grapheme joiner
            '\u{115F}',  // Hangul choseong filler
            '\u{1160}',  // Hangul jungseong filler
            '\u{17B4}',  // Khmer vowel inherent aq
            '\u{3164}',  // Hangul filler
            '\u{FE0F}',  // variation selector 16
            '\u{FFA0}',  // halfwidth Hangul filler
            '\u{E0100}', // variation selector 17
            '\u{200D}',  // zero-width joiner
        ] {
            let shown = Escaped(&format!("a{c}b")).to_string();
            assert_eq!(
                shown,
                format!("a\\u{{{:x}}}b", u32::from(c)),
                "U+{:04X}",
                u32::from(c)
            );
        }
        // Bidi and zero-width characters, everywhere in the name.
        for c in [
            '\u{200B}',
            '\u{200E}',
            '\u{202A}',
            '\u{2066}',
            '\u{2069}',
            '\u{061C}',
            '\u{FEFF}',
            '\u{E0041}',
        ] {
            let shown = Escaped(&format!("{c}x{c}")).to_string();
            assert!(!shown.contains(c), "U+{:04X}: {shown}", u32::from(c));
        }
        // Letters of every script, and combining marks after a letter, stay as they are.
        assert_eq!(
            Escaped("naïve Ünïcödé 検索 e\u{301}").to_string(),
            "naïve Ünïcödé 検索 e\u{301}"
        );
    }

    #[test]
    fn the_limit_is_inclusive() {
        assert!(NameError::check(256, 256).is_ok());
        let e = NameError::check(257, 256).unwrap_err();
        assert_eq!((e.len(), e.max()), (257, 256));
    }
}
