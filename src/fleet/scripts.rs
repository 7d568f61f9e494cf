//! The store-side half of the protocol: Lua scripts, run atomically by the server with its own
//! clock (`TIME`), loaded once and called by hash (`EVALSHA`, reloaded after `NOSCRIPT`: a
//! restarted server has forgotten them). Each script's header (in `lua/`) says what it takes
//! and answers; `wire.rs` parses the answers.

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
    /// Every poll: the boot id, and the tools open or controlled fleet-wide.
    pub(super) poll: Script,
    /// An operator's control, fleet-wide.
    pub(super) control: Script,
    /// New counts into the fleet's failure-rate window, and the window's sums.
    pub(super) counts: Script,
    /// The probe lease's holder extends it (its probe is in flight) or gives it back.
    pub(super) lease: Script,
    /// A replica's new failures (or a success) into the tool's fleet-wide failure streak.
    pub(super) streak: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            trip: Script::from_lua(lua!("trip")),
            claim: Script::from_lua(lua!("claim")),
            settle: Script::from_lua(lua!("settle")),
            poll: Script::from_lua(lua!("poll")),
            control: Script::from_lua(lua!("control")),
            counts: Script::from_lua(lua!("counts")),
            lease: Script::from_lua(lua!("lease")),
            streak: Script::from_lua(lua!("streak")),
        }
    }
}
