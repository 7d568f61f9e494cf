//! `rediss://`: the rustls client config the store connection uses (feature `fleet-tls`).
//!
//! fred's TLS code exists only with one of its rustls features, and each compiles a provider
//! crate with C in it (`enable-rustls-ring` → ring, the lighter: a C compiler, no cmake). The
//! provider used at run time is chosen here, never installed process-wide:
//!
//! 1. the process's default provider, if the application installed one (its choice wins);
//! 2. else graviola, pure Rust — the provider OTLP export uses — when the CPU has the
//!    instructions it requires ([`crate::cpu::pure_rust_tls_supported`]);
//! 3. else ring, which fred compiled anyway and which runs on every CPU: never a panic (under
//!    valgrind, which hides ADX, this is the branch taken).
//!
//! Roots: a PEM file given to the builder ([`FleetBuilder::tls_ca_file`]), else the platform's
//! (`rustls-native-certs`, which honours `SSL_CERT_FILE` / `SSL_CERT_DIR`). A complete
//! `rustls::ClientConfig` given to the builder is used as is.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use super::config::FleetBuilder;
use super::FleetError;

/// Which provider [`client_config`] chose, for the docs' claims and the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    ProcessDefault,
    Graviola,
    Ring,
}

/// The provider for the store's TLS connections (see the module docs).
pub(crate) fn provider() -> (Provider, Arc<CryptoProvider>) {
    if let Some(p) = CryptoProvider::get_default() {
        return (Provider::ProcessDefault, Arc::clone(p));
    }
    if crate::cpu::pure_rust_tls_supported() {
        return (
            Provider::Graviola,
            Arc::new(rustls_graviola::default_provider()),
        );
    }
    (
        Provider::Ring,
        Arc::new(rustls::crypto::ring::default_provider()),
    )
}

/// The client config for `rediss://`.
pub(super) fn client_config(b: &FleetBuilder) -> Result<ClientConfig, FleetError> {
    if let Some(config) = &b.tls {
        return Ok(ClientConfig::clone(config));
    }
    let mut roots = RootCertStore::empty();
    match &b.tls_ca_file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path).map_err(|e| {
                FleetError::Tls(format!("cannot read the CA file {}: {e}", path.display()))
            })?;
            for cert in certs {
                let cert = cert.map_err(|e| {
                    FleetError::Tls(format!("the CA file {} is not PEM: {e}", path.display()))
                })?;
                roots.add(cert).map_err(|e| {
                    FleetError::Tls(format!(
                        "a certificate in {} is unusable: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(FleetError::Tls(
                    "no trust roots: the platform's store is empty (set SSL_CERT_FILE, or \
                     FleetBuilder::tls_ca_file)"
                        .into(),
                ));
            }
        }
    }
    if roots.is_empty() {
        return Err(FleetError::Tls("the CA file holds no certificate".into()));
    }
    let (_, provider) = provider();
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FleetError::Tls(format!("the TLS provider: {e}")))
        .map(|c| c.with_root_certificates(roots).with_no_client_auth())
}
