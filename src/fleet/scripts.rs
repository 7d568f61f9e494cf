//! The store-side half of the protocol: Lua scripts, run atomically by the server with its own
//! clock (`TIME`), loaded once and called by hash (`EVALSHA`, reloaded after `NOSCRIPT`: a
//! restarted server, or a cluster node seen for the first time, has not got them). Each
//! script's header (in `lua/`) says which keys it is given (all in one shard: `keys.rs`), what
//! it takes and what it answers; `wire.rs` parses the answers.

use fred::types::scripts::Script;

macro_rules! lua {
    ($name:literal) => {
        concat!(
            include_str!("lua/prelude.lua"),
            include_str!(concat!("lua/", $name, ".lua"))
        )
    };
}

/// Every script of the protocol.
#[derive(Debug)]
pub(super) struct Scripts {
    /// A replica's breaker tripped: join the open episode or open the next one.
    pub(super) trip: Script,
    /// The single probe of an episode: set-if-absent with expiry.
    pub(super) claim: Script,
    /// The probe's result: close the episode or open the next one.
    pub(super) settle: Script,
    /// A poll's first half: a shard's boot id and change counter, and the tools it lists
    /// (open, controlled, streaking) when something changed.
    pub(super) index: Script,
    /// A poll's second half: the state, control and streak of the tools named.
    pub(super) read: Script,
    /// An operator's control, fleet-wide.
    pub(super) control: Script,
    /// New counts into the fleet's failure-rate window, and the window's sums.
    pub(super) counts: Script,
    /// The probe lease's holder extends it (its probe is in flight) or gives it back.
    pub(super) lease: Script,
    /// A replica's new failures (or a success) into the tool's fleet-wide failure streak.
    pub(super) streak: Script,
}

/// Which script to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Which {
    Trip,
    Claim,
    Settle,
    Index,
    Read,
    Control,
    Counts,
    Lease,
    Streak,
}

impl Scripts {
    pub(super) fn get(&self, which: Which) -> &Script {
        match which {
            Which::Trip => &self.trip,
            Which::Claim => &self.claim,
            Which::Settle => &self.settle,
            Which::Index => &self.index,
            Which::Read => &self.read,
            Which::Control => &self.control,
            Which::Counts => &self.counts,
            Which::Lease => &self.lease,
            Which::Streak => &self.streak,
        }
    }

    pub(super) fn new() -> Self {
        Self {
            trip: Script::from_lua(lua!("trip")),
            claim: Script::from_lua(lua!("claim")),
            settle: Script::from_lua(lua!("settle")),
            index: Script::from_lua(lua!("index")),
            read: Script::from_lua(lua!("read")),
            control: Script::from_lua(lua!("control")),
            counts: Script::from_lua(lua!("counts")),
            lease: Script::from_lua(lua!("lease")),
            streak: Script::from_lua(lua!("streak")),
        }
    }
}
