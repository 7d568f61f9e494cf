//! Fleet-wide counts: this replica's new calls into the fleet's failure-rate windows.

use super::*;

impl Task {
    /// Adds this replica's new counts to the fleet's windows and trips where the fleet's
    /// failure rate says so.
    pub(super) async fn rates(&mut self) {
        if self.settings.rate_scope == RateScope::Local {
            return;
        }
        // Every tool, whatever its policy: what was counted up to now is marked sent each
        // round, so a tool that turns to a failure rate later sends only calls made since. A
        // round reads each tool's two counters (allocation-free), and the whole view of the
        // tools whose counts moved only: at rest it costs each tool two loads, whatever the
        // number of tools.
        let mut moved: Vec<(String, u64, u64)> = Vec::new();
        let (tools, names, keys, outcomes) = (
            &mut self.tools,
            &mut self.names,
            &self.store.keys,
            &self.outcomes,
        );
        self.registry.coordination().for_each_count(|name, c| {
            let ts = match tools.get_mut(name) {
                Some(ts) => ts,
                None => {
                    // First sight (a tool created since the last round): every count is new.
                    let Some(hex) = encode_tool(name) else { return };
                    names.insert(outcomes.key(name), name.to_owned());
                    let ts = ToolSync {
                        hex,
                        shard: keys.shard_of(name),
                        ..ToolSync::default()
                    };
                    tools.entry(name.to_owned()).or_insert(ts)
                }
            };
            // Not marked yet: the tool was created since the last round (tools that existed
            // when this replica joined got their baseline then), so every count is new; a mark
            // of another incarnation: the entry was evicted and created again, counting from
            // zero (whatever its counts reached since, they are all new).
            let (s0, f0) = match ts.sent {
                Some((incarnation, s, f))
                    if incarnation == c.incarnation && s <= c.success && f <= c.failure =>
                {
                    (s, f)
                }
                _ => (0, 0),
            };
            let (ds, df) = (c.success - s0, c.failure - f0);
            // Marked sent before the call: a count is never sent twice (a lost call loses it).
            ts.sent = Some((c.incarnation, c.success, c.failure));
            if ds > 0 || df > 0 {
                moved.push((name.to_owned(), ds, df));
            }
        });
        // One call per shard and window width, in batches, for the tools under a failure rate
        // with new counts only (a replica without calls has nothing to add, and the replicas
        // with calls trip the tool for the fleet): (name, hex, new successes, new failures,
        // view).
        type Row = (String, String, u64, u64, CoordinationView);
        let mut by_width: HashMap<(usize, u64), Vec<Row>> = HashMap::new();
        for (name, ds, df) in moved {
            let Some(v) = self.registry.coordination().coordination_view(&name) else {
                continue;
            };
            let TripPolicy::FailureRate { window, .. } = v.trip else {
                continue;
            };
            let Some(ts) = self.tools.get(&name) else {
                continue;
            };
            let width = arg_ms(window)
                .div_ceil(crate::policy::WINDOW_BUCKETS as u64)
                .max(1);
            let (shard, hex) = (ts.shard, ts.hex.clone());
            by_width
                .entry((shard, width))
                .or_default()
                .push((name, hex, ds, df, v));
        }
        for ((shard, width), tools) in by_width {
            if !self.shards[shard].connected {
                continue; // counts made while the shard is away are its replica's own
            }
            for batch in tools.chunks(COUNTS_BATCH) {
                let mut args = vec![width.to_string(), batch.len().to_string()];
                let mut keys = self.store.keys.head(shard);
                for (_, hex, ds, df, _) in batch {
                    args.extend([hex.clone(), ds.to_string(), df.to_string()]);
                    keys.push(self.store.keys.rates(shard, hex, width));
                }
                let reply = match self.store.call(shard, Which::Counts, keys, args).await {
                    Ok(f) => f,
                    Err(e) => {
                        self.store_failed(shard, &e);
                        break;
                    }
                };
                let Some(r) = wire::counts_reply(&reply) else {
                    self.reject(Rejected::Reply, 1);
                    break;
                };
                self.note(shard, r.boot, r.corrupt);
                // A tool whose window cannot be read is skipped (and said); the others count.
                self.reject(Rejected::Reply, r.value.unreadable);
                for (tool, successes, failures) in r.value.tools {
                    let Some((_, _, _, _, v)) = batch.iter().find(|t| t.0 == tool) else {
                        continue;
                    };
                    let TripPolicy::FailureRate {
                        ratio, min_calls, ..
                    } = v.trip
                    else {
                        continue;
                    };
                    let calls = successes.saturating_add(failures);
                    let open_here = self.tools.get(&tool).is_some_and(|t| t.episode.is_some());
                    if !open_here
                        && v.state == BreakerState::Closed
                        && TripPolicy::rate_trips(ratio, min_calls, failures, calls)
                    {
                        let recovery = v.recovery;
                        self.trip(&tool, recovery, true).await;
                    }
                }
            }
        }
    }
}
