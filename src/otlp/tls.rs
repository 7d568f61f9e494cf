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
    if !crate::cpu::pure_rust_tls_supported() {
        return Err(OtlpError::TlsProviderUnsupported);
    }
    // An error means another thread installed one meanwhile: theirs wins.
    let _ = rustls_graviola::default_provider().install_default();
    Ok(())
}
