//! Where the protocol lives in the store: the key layout of a single server and of a cluster.
//!
//! Every script touches the keys of one *shard* only, and the caller names each of them
//! (`KEYS`): a cluster runs a script only when its keys hash to one slot, and some managed
//! offerings refuse a script that names none. A shard is one key space with its own boot id,
//! change counter, sets of open, controlled and streaking tools, and events channel.
//!
//! * **Single server** (`redis://`, `valkey://`, Sentinel): one shard, the key space
//!   `{prefix}:v1:` — the names the fleet has always used, so replicas of earlier releases and
//!   of this one share a store during a rolling upgrade. Events go out with `PUBLISH`.
//! * **Cluster** (`redis-cluster://`, `valkey-cluster://`): `shards` shards (default
//!   [`DEFAULT_SHARDS`]), shard `i` under the hash tag `{prefix:s<i>:<k>}`, where `k` is the
//!   smallest number that puts the tag's slot in the `i`-th of `shards` equal parts of the
//!   slot space — so on a cluster whose primaries split the slots evenly (what `--cluster
//!   create` and the managed offerings do) the shards land on different primaries. Events go
//!   out with `SPUBLISH` on the shard's own channel (sharded pub/sub: the shard's node only).
//!
//! A tool belongs to shard `fnv1a64(name) mod shards` (the 64-bit FNV-1a hash of its UTF-8
//! bytes): every key of the tool is in its shard's slot.

/// The shards of a cluster fleet when not set: a cluster's smallest usual size (three
/// primaries), so that each primary holds one.
pub const DEFAULT_SHARDS: u16 = 3;
/// The most shards a cluster fleet may have.
pub const MAX_SHARDS: u16 = 64;

/// The slots of a cluster.
const SLOTS: u32 = 16384;

/// How the store lays the protocol out (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Keys {
    /// Per shard: the start of every key (`{prefix}:v1:` or `{tag}:v1:`).
    bases: Vec<String>,
    cluster: bool,
}

impl Keys {
    /// The single-server layout.
    pub(super) fn single(prefix: &str) -> Self {
        Self {
            bases: vec![format!("{prefix}:v1:")],
            cluster: false,
        }
    }

    /// The cluster layout with `shards` shards (1 ..= [`MAX_SHARDS`]).
    pub(super) fn cluster(prefix: &str, shards: u16) -> Self {
        let shards = shards.clamp(1, MAX_SHARDS);
        Self {
            bases: (0..shards)
                .map(|i| format!("{{{}}}:v1:", shard_tag(prefix, i, shards)))
                .collect(),
            cluster: true,
        }
    }

    /// How many shards.
    pub(super) fn shards(&self) -> usize {
        self.bases.len()
    }

    /// The shard `tool` belongs to.
    pub(super) fn shard_of(&self, tool: &str) -> usize {
        let n = self.bases.len() as u64;
        // Lossless: the remainder is below the shard count.
        (fnv1a64(tool.as_bytes()) % n) as usize
    }

    /// The command events go out with: `PUBLISH`, or `SPUBLISH` on a cluster.
    pub(super) fn publish(&self) -> &'static str {
        if self.cluster {
            "SPUBLISH"
        } else {
            "PUBLISH"
        }
    }

    fn key(&self, shard: usize, name: &str) -> String {
        format!("{}{name}", self.bases[shard])
    }

    /// The shard's events channel.
    pub(super) fn channel(&self, shard: usize) -> String {
        self.key(shard, "ev")
    }

    /// The shard of an events channel, if it is one of this fleet's.
    pub(super) fn shard_of_channel(&self, channel: &str) -> Option<usize> {
        (0..self.bases.len()).find(|&s| {
            channel
                .strip_prefix(self.bases[s].as_str())
                .is_some_and(|rest| rest == "ev")
        })
    }

    /// The keys every script starts with: the shard's boot id and change counter.
    pub(super) fn head(&self, shard: usize) -> Vec<String> {
        vec![self.key(shard, "boot"), self.key(shard, "seq")]
    }

    /// The shard's sets: open, controlled, streaking tools.
    pub(super) fn open(&self, shard: usize) -> String {
        self.key(shard, "open")
    }

    pub(super) fn controls(&self, shard: usize) -> String {
        self.key(shard, "ctls")
    }

    pub(super) fn streaks(&self, shard: usize) -> String {
        self.key(shard, "strk")
    }

    /// A tool's key of `kind` (`t` state, `c` control, `k` streak, `q` quorum) in its shard.
    pub(super) fn tool(&self, shard: usize, kind: &str, hex: &str) -> String {
        format!("{}{kind}:{hex}", self.bases[shard])
    }

    /// The probe lease of the tool's episode `ep`.
    pub(super) fn lease(&self, shard: usize, hex: &str, ep: u64) -> String {
        format!("{}p:{hex}:{ep}", self.bases[shard])
    }

    /// The tool's fleet-wide counts for windows of buckets `width_ms` wide.
    pub(super) fn rates(&self, shard: usize, hex: &str, width_ms: u64) -> String {
        format!("{}r:{hex}:{width_ms}", self.bases[shard])
    }

    /// The slot of shard `shard` on a cluster.
    pub(super) fn slot(&self, shard: usize) -> u16 {
        key_slot(self.bases[shard].as_bytes())
    }
}

/// Shard `i`'s hash tag: `prefix:s<i>:<k>`, the first `k` whose slot lies in the `i`-th part.
fn shard_tag(prefix: &str, i: u16, shards: u16) -> String {
    let (lo, hi) = (
        u32::from(i) * SLOTS / u32::from(shards),
        (u32::from(i) + 1) * SLOTS / u32::from(shards),
    );
    // Ends: the hash hits every part within a few dozen tries (the parts are at least
    // 16384 / 64 slots wide).
    let mut k = 0u32;
    loop {
        let tag = format!("{prefix}:s{i}:{k}");
        if (lo..hi).contains(&u32::from(key_slot(tag.as_bytes()))) || k == u32::MAX {
            return tag;
        }
        k += 1;
    }
}

/// The 64-bit FNV-1a hash.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// CRC16-XMODEM, the cluster's key hash.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in bytes {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A key's cluster slot: the hash of its tag (between the first `{` and the next `}`, when
/// not empty) or of the whole key.
pub(super) fn key_slot(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|b| *b == b'}')
                .filter(|len| *len > 0)
                .map(|len| &rest[..len])
        })
        .unwrap_or(key);
    crc16(tag) % SLOTS as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_clusters() {
        // The cluster specification's test vector, and keys a server placed.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{foo}:bar"), 12182);
        assert_eq!(key_slot(b"{}foo"), key_slot(b"{}foo"));
        assert_ne!(key_slot(b"{}foo"), key_slot(b"foo"));
    }

    #[test]
    fn the_single_layout_keeps_the_names_of_earlier_releases() {
        let k = Keys::single("tool_health");
        assert_eq!(k.shards(), 1);
        assert_eq!(k.shard_of("anything"), 0);
        assert_eq!(k.head(0), ["tool_health:v1:boot", "tool_health:v1:seq"]);
        assert_eq!(k.tool(0, "t", "6162"), "tool_health:v1:t:6162");
        assert_eq!(k.lease(0, "6162", 7), "tool_health:v1:p:6162:7");
        assert_eq!(k.channel(0), "tool_health:v1:ev");
        assert_eq!(k.shard_of_channel("tool_health:v1:ev"), Some(0));
        assert_eq!(k.shard_of_channel("tool_health:v1:evx"), None);
        assert_eq!(k.publish(), "PUBLISH");
    }

    #[test]
    fn cluster_shards_spread_over_the_slot_space_and_each_keeps_to_one_slot() {
        for shards in [1u16, 2, 3, 4, 7, 16, MAX_SHARDS] {
            let k = Keys::cluster("tool_health", shards);
            assert_eq!(k.shards(), usize::from(shards));
            for s in 0..k.shards() {
                let slot = u32::from(k.slot(s));
                let part = s as u32;
                assert!(
                    slot * u32::from(shards) / SLOTS == part,
                    "shard {s} of {shards} in slot {slot}"
                );
                let keys = [
                    k.head(s)[0].clone(),
                    k.head(s)[1].clone(),
                    k.open(s),
                    k.controls(s),
                    k.streaks(s),
                    k.channel(s),
                    k.tool(s, "t", "6162"),
                    k.lease(s, "6162", 9),
                    k.rates(s, "6162", 1000),
                ];
                for key in keys {
                    assert_eq!(key_slot(key.as_bytes()), k.slot(s), "{key}");
                }
            }
        }
        // Three shards on a cluster whose three primaries split the slots evenly: one each.
        let k = Keys::cluster("tool_health", 3);
        let node = |slot: u16| (u32::from(slot) * 3 / SLOTS) as usize;
        assert_eq!([0, 1, 2].map(|s| node(k.slot(s))), [0, 1, 2]);
        assert_eq!(k.publish(), "SPUBLISH");
        assert_eq!(k.shard_of_channel(&k.channel(2)), Some(2));
    }

    #[test]
    fn tools_spread_over_the_shards_by_their_names_hash() {
        let k = Keys::cluster("p", 3);
        let mut per = [0usize; 3];
        for i in 0..3000 {
            per[k.shard_of(&format!("tool-{i}"))] += 1;
        }
        assert!(per.iter().all(|n| (800..1200).contains(n)), "{per:?}");
        // The hash is FNV-1a, as FLEET.md says (other implementations follow it).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
