//! The breaker word: a whole breaker state in one `u64`.
//!
//! ```text
//!  63                                    24 23                     2 1   0
//! ┌────────────────────────────────────────┬────────────────────────┬─────┐
//! │ deadline: 40 bits, milliseconds         │ generation: 22 bits    │state│
//! └────────────────────────────────────────┴────────────────────────┴─────┘
//! state      0 Closed, 1 Open, 2 HalfOpen
//! generation grows (wrapping at 2^22) on every transition made by an event: a trip, a probe
//!            grant, a probe's success or failure. A lease expiry keeps the probe's generation,
//!            so whether anyone has yet written the expiry into the word changes nothing.
//! deadline   Open: the instant the next probe may be granted (last failure + cooldown).
//!            HalfOpen: the instant the probe lease expires. All ones = never.
//!            Closed: the breaker's tag (which breaker this is: see `Permit`), so that the
//!            word shifted right by the state bits is the key of the permits it hands out.
//! ```
//!
//! The deadline is a [`Ticks`] instant: 40 bits of milliseconds cover about 34 years of clock
//! time, and anything beyond is "never".

use crate::ticks::{Ticks, TICK_BITS};

const STATE_BITS: u32 = 2;
const GEN_BITS: u32 = 22;
const TIME_SHIFT: u32 = STATE_BITS + GEN_BITS;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;
/// Generations wrap at this mask.
pub(crate) const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

// The deadline field is exactly as wide as a tick count.
const _: () = assert!(TIME_SHIFT + TICK_BITS == 64);
// A permit's key is the word without its state bits: generation, then deadline (a Closed
// word's tag).
const _: () = assert!(GEN_BITS == crate::call::PERMIT_GENERATION_BITS);
const _: () = assert!(TICK_BITS == crate::call::PERMIT_TAG_BITS);

pub(crate) const CLOSED: u64 = 0;
pub(crate) const OPEN: u64 = 1;
pub(crate) const HALF_OPEN: u64 = 2;

/// A decoded breaker word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    pub(crate) state: u64,
    pub(crate) generation: u32,
    pub(crate) deadline: Ticks,
}

impl Word {
    /// A new breaker: closed, generation 0.
    #[cfg(test)]
    pub(crate) const FRESH: Word = Word {
        state: CLOSED,
        generation: 0,
        deadline: Ticks::ZERO,
    };

    pub(crate) fn decode(raw: u64) -> Self {
        Self {
            state: raw & STATE_MASK,
            generation: ((raw >> STATE_BITS) as u32) & GEN_MASK,
            deadline: Ticks::new(raw >> TIME_SHIFT),
        }
    }

    pub(crate) fn encode(self) -> u64 {
        (self.deadline.get() << TIME_SHIFT)
            | (u64::from(self.generation & GEN_MASK) << STATE_BITS)
            | (self.state & STATE_MASK)
    }

    pub(crate) fn closed(generation: u32) -> Self {
        Self {
            state: CLOSED,
            generation: generation & GEN_MASK,
            deadline: Ticks::ZERO,
        }
    }

    /// The word with the breaker's `tag` in a Closed word's deadline field (any other word is
    /// returned as it is).
    #[inline]
    pub(crate) fn tagged(self, tag: u64) -> Self {
        if self.state == CLOSED {
            Self {
                deadline: Ticks::new(tag),
                ..self
            }
        } else {
            self
        }
    }

    /// The key of an ordinary admission's permit (generation and tag) from a raw Closed word;
    /// `None` for any other state.
    #[inline(always)]
    pub(crate) fn closed_key(raw: u64) -> Option<u64> {
        (raw & STATE_MASK == CLOSED).then_some(raw >> STATE_BITS)
    }

    pub(crate) fn open(generation: u32, ready_at: Ticks) -> Self {
        Self {
            state: OPEN,
            generation: generation & GEN_MASK,
            deadline: ready_at,
        }
    }

    /// Whether the word is Open as written (a half-open word whose lease expired is not,
    /// until a step writes the expiry).
    pub(crate) fn is_open(self) -> bool {
        self.state == OPEN
    }

    pub(crate) fn half_open(generation: u32, lease_end: Ticks) -> Self {
        Self {
            state: HALF_OPEN,
            generation: generation & GEN_MASK,
            deadline: lease_end,
        }
    }
}

/// The generation after `g`, wrapping inside its field.
pub(crate) fn next_gen(g: u32) -> u32 {
    g.wrapping_add(1) & GEN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_roundtrips_every_field() {
        for w in [
            Word::FRESH,
            Word::open(GEN_MASK, Ticks::NEVER),
            Word::half_open(12345, Ticks::new(Ticks::NEVER.get() - 1)),
            Word::closed(7),
        ] {
            assert_eq!(Word::decode(w.encode()), w);
        }
        assert_eq!(next_gen(GEN_MASK), 0, "generations wrap inside their field");
    }
}

#[cfg(test)]
mod tag_tests {
    use super::*;
    use crate::call::Permit;

    #[test]
    fn a_closed_word_carries_its_tag_and_shifts_to_its_permits_key() {
        let w = Word::closed(5).tagged(0xDEAD_BEEF);
        assert_eq!(Word::decode(w.encode()), w);
        let key = Word::closed_key(w.encode()).unwrap();
        let permit = Permit::admitted(5).tagged(0xDEAD_BEEF);
        assert_eq!(key, permit.key());
        assert_eq!(permit.closed_word(), w.encode());
        // Other states keep their deadline, and have no key.
        let o = Word::open(5, Ticks::new(1234));
        assert_eq!(o.tagged(77), o);
        assert_eq!(Word::closed_key(o.encode()), None);
        assert_eq!(
            Word::closed_key(Word::half_open(5, Ticks::new(9)).encode()),
            None
        );
    }
}
