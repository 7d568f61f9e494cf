//! The crypto provider OTLP over HTTPS uses: the pure-Rust one, unless the process chose its own.

use super::OtlpError;

/// Installs the pure-Rust rustls provider as the process default, unless one is installed.
///
/// graviola asserts its CPU requirements at its first use (a TLS handshake on the exporter's
/// thread): on a CPU without them — or under valgrind, which does not emulate ADX — that would
/// be a panic far from here. So they are checked here first, and an unsupported CPU is a clear
/// error with the fix (install another provider before `init`; yours is kept).
#[cfg(feature = "otlp-http")]
pub(super) fn install_crypto_provider() -> Result<(), OtlpError> {
    if rustls::crypto::CryptoProvider::get_default().is_some() {
        return Ok(()); // the process's choice wins
    }
    if !pure_rust_tls_supported() {
        return Err(OtlpError::TlsProviderUnsupported);
    }
    // An error means another thread installed one meanwhile: theirs wins.
    let _ = rustls_graviola::default_provider().install_default();
    Ok(())
}

/// Whether this CPU has what graviola requires (its own list, checked the same way).
#[cfg(feature = "otlp-http")]
fn pure_rust_tls_supported() -> bool {
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
