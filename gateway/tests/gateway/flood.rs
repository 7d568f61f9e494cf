//! The trace receiver under a flood, against the real binary: 3 gRPC connections × 8 streams
//! of 8 MB at once are bounded by `max_in_flight_bytes` as they arrive (issue 29, item 5),
//! measured as the gateway process's peak resident memory.

use serde_json::json;

use crate::support::{upstream, Gateway, WAIT};

/// Messages as bytes, both ways (the test's own: the receiver reads raw bytes too).
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl tonic::codec::Encoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: bytes::Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use bytes::BufMut as _;
        dst.put(item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = bytes::Bytes;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<bytes::Bytes>, tonic::Status> {
        use bytes::Buf as _;
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl tonic::codec::Codec for RawCodec {
    type Encode = bytes::Bytes;
    type Decode = bytes::Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`: its peak).
fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc (Linux)");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The receiver's default `max_in_flight_bytes`.
const IN_FLIGHT: u64 = 64 << 20;

pub async fn a_grpc_flood_is_bounded_by_the_in_flight_budget_as_it_arrives() {
    let config = json!({"mcpServers": {"rs": upstream::rmcp()}});
    let gw = Gateway::http(&config, &["--otlp-grpc", "127.0.0.1:0"]).await;
    let line = gw
        .log
        .wait_for("receiving OTLP/gRPC traces on ", WAIT)
        .await;
    let addr = line.rsplit("on ").next().unwrap().trim().to_owned();
    let pid = gw.child.id().expect("the gateway runs");
    // An 8 MB request (under the 8 MiB request limit) that is valid OTLP: one unknown field,
    // skipped by the reader — the memory is the point, not the spans.
    let payload = 8_000_000usize;
    let mut message = vec![0x7a]; // field 15, length-delimited
    let mut n = payload;
    while n >= 0x80 {
        message.push((n as u8) | 0x80);
        n >>= 7;
    }
    message.push(n as u8);
    message.resize(message.len() + payload, 0);
    let message = bytes::Bytes::from(message);
    let export = http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    // One request first: the runtime's own allocations settle before the baseline.
    let warm = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect to the gRPC receiver");
    let mut grpc = tonic::client::Grpc::new(warm);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(message.slice(..1000.min(message.len()))),
        export.clone(),
        RawCodec,
    )
    .await
    .ok();
    let before = proc_kib(pid, "VmRSS");
    // 3 connections × 8 streams × 8 MB, all at once.
    let mut calls = Vec::new();
    for _ in 0..3 {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .expect("connect to the gRPC receiver");
        for _ in 0..8 {
            let (channel, message, export) = (channel.clone(), message.clone(), export.clone());
            calls.push(tokio::spawn(async move {
                let mut grpc = tonic::client::Grpc::new(channel);
                grpc.ready().await.map_err(|e| e.to_string())?;
                match grpc
                    .unary(tonic::Request::new(message), export, RawCodec)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(s) if s.code() == tonic::Code::ResourceExhausted => Ok(false),
                    Err(s) => Err(format!("{:?}: {}", s.code(), s.message())),
                }
            }));
        }
    }
    let mut accepted = 0;
    let mut throttled = 0;
    for call in calls {
        let r = tokio::time::timeout(WAIT, call)
            .await
            .expect("answered in time")
            .unwrap();
        match r {
            Ok(true) => accepted += 1,
            Ok(false) => throttled += 1,
            Err(e) => panic!("a flood request failed otherwise: {e}"),
        }
    }
    let peak = proc_kib(pid, "VmHWM");
    let grew = peak.saturating_sub(before) * 1024;
    eprintln!(
        "gRPC flood: {accepted} accepted, {throttled} throttled; resident {} MiB before, peak {} MiB",
        before / 1024,
        peak / 1024
    );
    // The budget, plus what HTTP/2 and the allocator keep around it.
    assert!(
        grew < IN_FLIGHT + (32 << 20),
        "resident memory grew {} MiB under the flood (budget {} MiB)",
        grew >> 20,
        IN_FLIGHT >> 20
    );
    assert!(accepted >= 1, "the budget admits what fits");
    assert!(throttled >= 1, "24 × 8 MB do not fit in 64 MiB at once");
}
