//! The tool-health demo lives in `examples/agent.rs` of this package: run it from the
//! repository's root with `cargo run --example agent`. This library is empty; it exists because
//! a package needs one target besides its examples.
