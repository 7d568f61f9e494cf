//! What the CPU offers, for the pure-Rust TLS provider (graviola) that OTLP export and the
//! fleet's `rediss://` connections use.
//!
//! graviola asserts its CPU requirements at its first use — a panic, far from any setup call —
//! on a CPU without them, and under valgrind, which does not emulate ADX. Callers check here
//! first and choose otherwise (a typed error for OTLP, ring for the fleet).

/// Whether this CPU has every instruction graviola requires (its own list, checked the same
/// way it checks).
pub(crate) fn pure_rust_tls_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("adx")
            && std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("neon")
            && std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
            && std::arch::is_aarch64_feature_detected!("sha2")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}
