//! Operator controls, fleet-wide.

use super::*;

impl Task {
    pub(super) async fn control(
        &mut self,
        tool: &str,
        change: ControlChange,
    ) -> Result<(), FleetError> {
        // Here at once, whatever the store does.
        let r = &self.registry;
        let (mode, for_ms, shadow, reset) = match change {
            ControlChange::ForceOpen(None) => {
                r.force_open(tool);
                ("1", wire::NEVER_MS, "-", "0")
            }
            ControlChange::ForceOpen(Some(d)) => {
                r.force_open_for(tool, d);
                ("1", arg_ms(d), "-", "0")
            }
            ControlChange::ForceClosed => {
                r.force_closed(tool);
                ("2", 0, "-", "0")
            }
            ControlChange::Release => {
                r.release_control(tool);
                ("0", 0, "-", "0")
            }
            ControlChange::Shadow(on) => {
                r.set_shadow(tool, on);
                ("-", 0, if on { "1" } else { "0" }, "0")
            }
            ControlChange::Reset => {
                r.reset(tool);
                ("-", 0, "-", "1")
            }
        };
        let replica = self.shared.replica;
        let Some(ts) = self.tool(tool) else {
            return Err(FleetError::NotShared);
        };
        if matches!(change, ControlChange::Reset) {
            ts.episode = None;
        }
        let (shard, hex) = (ts.shard, ts.hex.clone());
        let args = vec![
            hex.clone(),
            mode.to_owned(),
            for_ms.to_string(),
            shadow.to_owned(),
            reset.to_owned(),
            replica.to_string(),
        ];
        let keys = self.keys(
            shard,
            &hex,
            &[Part::State, Part::Control, Part::Controls, Part::Open],
        );
        let reply = match self.store.call(shard, Which::Control, keys, args).await {
            Ok(f) => f,
            Err(e) => {
                self.store_failed(shard, &e);
                return Err(e.to_fleet());
            }
        };
        let Some(r) = wire::control_reply(&reply) else {
            self.reject(Rejected::Reply, 1);
            return Err(FleetError::Rejected);
        };
        self.note(shard, r.boot, r.corrupt);
        if let Some(ts) = self.tools.get_mut(tool) {
            // What this replica set is what the fleet set: its own echo changes nothing, and a
            // later release elsewhere releases it here too.
            let prev = ts.ctl.unwrap_or(SharedControl {
                ver: 0,
                mode: SharedMode::Normal,
                shadow: false,
                resets: ts.resets.unwrap_or(0),
            });
            let mode = match change {
                ControlChange::ForceOpen(d) => SharedMode::ForcedOpen {
                    remaining: d.unwrap_or(Duration::MAX),
                },
                ControlChange::ForceClosed => SharedMode::ForcedClosed,
                ControlChange::Release => SharedMode::Normal,
                _ => prev.mode,
            };
            let shadow = match change {
                ControlChange::Shadow(on) => on,
                _ => prev.shadow,
            };
            let resets = prev.resets + u64::from(matches!(change, ControlChange::Reset));
            ts.ctl_ver = ts.ctl_ver.max(r.value);
            ts.ctl = Some(SharedControl {
                ver: r.value,
                mode,
                shadow,
                resets,
            });
            ts.resets = Some(resets);
        }
        Ok(())
    }
    /// Applies an operator's control made on another replica (or read from the store).
    pub(super) fn apply_control(&mut self, tool: &str, control: ControlField, source: Source) {
        let registry = Arc::clone(&self.registry);
        let Some(ts) = self.tool(tool) else { return };
        let c = match control {
            ControlField::Ok(c) => c,
            ControlField::None | ControlField::Corrupt => return,
            ControlField::Future => {
                ts.future = true;
                self.reject(Rejected::Future, 1);
                return;
            }
        };
        if c.ver <= ts.ctl_ver {
            return;
        }
        ts.ctl_ver = c.ver;
        let before = ts.ctl;
        match c.mode {
            SharedMode::Normal => {
                if before.is_some_and(|b| b.mode != SharedMode::Normal) {
                    registry.release_control(tool);
                }
            }
            SharedMode::ForcedOpen { remaining } if remaining == Duration::MAX => {
                registry.force_open(tool);
            }
            SharedMode::ForcedOpen { remaining } => {
                registry.force_open_for(tool, remaining);
            }
            SharedMode::ForcedClosed => {
                registry.force_closed(tool);
            }
        }
        if c.shadow != before.is_some_and(|b| b.shadow) {
            registry.set_shadow(tool, c.shadow);
        }
        let seen = ts.resets.unwrap_or(match source {
            Source::Message => c.resets.saturating_sub(1),
            Source::Read => c.resets,
        });
        if c.resets > seen {
            registry.reset(tool);
            ts.episode = None;
        }
        ts.resets = Some(c.resets);
        ts.ctl = Some(c);
        self.shared.applied[CONTROL].fetch_add(1, Ordering::Relaxed);
    }
}
