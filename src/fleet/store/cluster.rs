//! A cluster's routing, as much of it as the fleet needs: which primary serves a slot.
//!
//! The fleet does not use fred's cluster client: it connects to every primary at once, and
//! while one of them cannot be reached it holds every command back (its reconnection connects
//! to all or none). A replica cut off from one node must keep coordinating the tools of the
//! others, so each shard has its own connections to the primary of its slot, found with
//! `CLUSTER SLOTS` and followed through `MOVED` answers and failovers.

use fred::prelude::*;
use fred::types::config::Server;

/// One range of slots and the primary that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SlotRange {
    pub(super) start: u16,
    pub(super) end: u16,
    pub(super) primary: Server,
}

/// `CLUSTER SLOTS`'s answer, asked of `asked` (the host of a node that leaves its own
/// address empty or unknown). `None` when the answer is not that command's.
pub(super) fn parse_slots(value: Value, asked: &str) -> Option<Vec<SlotRange>> {
    let Value::Array(ranges) = value else {
        return None;
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            return None;
        };
        let mut fields = fields.into_iter();
        let (Some(start), Some(end), Some(Value::Array(node))) =
            (fields.next(), fields.next(), fields.next())
        else {
            return None;
        };
        let slot = |v: Value| match v {
            Value::Integer(n) => u16::try_from(n).ok().filter(|n| *n < 16384),
            _ => None,
        };
        let mut node = node.into_iter();
        let (Some(host), Some(Value::Integer(port))) = (node.next(), node.next()) else {
            return None;
        };
        let host = match host {
            Value::String(s) => s.to_string(),
            Value::Bytes(b) => String::from_utf8(b.to_vec()).ok()?,
            Value::Null => String::new(),
            _ => return None,
        };
        // An empty or unknown endpoint: the node's address is the one it was asked on.
        let host = if host.is_empty() || host == "?" {
            asked.to_owned()
        } else {
            host
        };
        out.push(SlotRange {
            start: slot(start)?,
            end: slot(end)?,
            primary: Server::new(host, u16::try_from(port).ok()?),
        });
    }
    Some(out)
}

/// The primary serving `slot`.
pub(super) fn primary_of(ranges: &[SlotRange], slot: u16) -> Option<&Server> {
    ranges
        .iter()
        .find(|r| (r.start..=r.end).contains(&slot))
        .map(|r| &r.primary)
}

/// The node a `MOVED <slot> <host>:<port>` (or `ASK`) answer sends to.
pub(super) fn redirection(details: &str) -> Option<Server> {
    let mut parts = details.split_whitespace();
    if !matches!(parts.next(), Some("MOVED" | "ASK")) {
        return None;
    }
    let _slot = parts.next()?;
    let (host, port) = parts.next()?.rsplit_once(':')?;
    Some(Server::new(host.to_owned(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::String(host.into()),
            Value::Integer(port),
            Value::String("id".into()),
        ])
    }

    #[test]
    fn slots_are_read_and_an_unknown_endpoint_is_the_node_asked() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Integer(0),
                Value::Integer(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![
                Value::Integer(5461),
                Value::Integer(16383),
                node("", 7001),
            ]),
        ]);
        let ranges = parse_slots(reply, "seed").unwrap();
        assert_eq!(
            primary_of(&ranges, 5460),
            Some(&Server::new("10.0.0.1", 7000))
        );
        assert_eq!(primary_of(&ranges, 5461), Some(&Server::new("seed", 7001)));
        assert_eq!(primary_of(&ranges[..1], 9000), None);
        for bad in [
            Value::Integer(1),
            Value::Array(vec![Value::Array(vec![Value::Integer(0)])]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(20000),
                node("h", 1),
            ])]),
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(1),
                node("h", 70000),
            ])]),
        ] {
            assert_eq!(parse_slots(bad.clone(), "seed"), None, "{bad:?}");
        }
    }

    #[test]
    fn a_redirection_names_its_node() {
        assert_eq!(
            redirection("MOVED 12182 127.0.0.1:17003"),
            Some(Server::new("127.0.0.1", 17003))
        );
        assert_eq!(
            redirection("ASK 1 node.internal:6379"),
            Some(Server::new("node.internal", 6379))
        );
        for bad in ["MOVED 1", "ERR x", "MOVED 1 host", "MOVED 1 h:x", ""] {
            assert_eq!(redirection(bad), None, "{bad}");
        }
    }
}
