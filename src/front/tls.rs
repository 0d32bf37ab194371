//! TLS on the gateway's listeners: the certificate chain and private key of `[server] tls_cert` / `tls_key`, read
//! from PEM files into one rustls server configuration, and swapped whole when a reload reads them again.
//!
//! Rules:
//! - Every failure names the file it is about and the key that names it: a file that cannot be read, one that
//!   holds no certificate (or no private key), PEM that does not decode, and a key that is not the certificate's
//!   (rustls compares the key's public half with the end-entity certificate's).
//! - The protocol is HTTP/1.1 only (ALPN offers `http/1.1`); TLS 1.2 and 1.3 with rustls's safe defaults over the
//!   `ring` provider the backend client already uses. No client certificates are asked for.
//! - A new certificate applies to the connections accepted after the swap; open ones keep the one they were
//!   accepted with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::swap::Swap;

/// Why the TLS files cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {} (`[server] {key}`): {source}", .path.display())]
    Read { path: PathBuf, key: &'static str, source: std::io::Error },
    #[error("{} (`[server] {key}`) is not valid PEM: {problem}", .path.display())]
    Pem { path: PathBuf, key: &'static str, problem: String },
    #[error("{} (`[server] tls_cert`) holds no certificate (a PEM \"BEGIN CERTIFICATE\" block)", .0.display())]
    NoCertificate(PathBuf),
    #[error(
        "{} (`[server] tls_key`) holds no private key (a PEM \"BEGIN PRIVATE KEY\", \"BEGIN RSA PRIVATE KEY\" or \
         \"BEGIN EC PRIVATE KEY\" block)", .0.display()
    )]
    NoKey(PathBuf),
    #[error("the private key {} (`[server] tls_key`) cannot serve the certificate {} (`[server] tls_cert`): {problem}", .key.display(), .cert.display())]
    Unusable { cert: PathBuf, key: PathBuf, problem: String },
}

/// The TLS configuration new connections are accepted with; replaced whole by a reload.
pub struct ServerTls(Swap<TlsAcceptor>);

impl ServerTls {
    /// Reads `cert` (a PEM chain, end-entity certificate first) and `key` (its PEM private key).
    pub fn load(cert: &Path, key: &Path) -> Result<ServerTls, TlsError> {
        Ok(ServerTls(Swap::new(acceptor(cert, key)?)))
    }

    /// Serves `acceptor` (see [`acceptor`]) to the connections accepted from now on.
    pub fn replace(&self, acceptor: TlsAcceptor) {
        self.0.store(acceptor);
    }

    /// The configuration a connection accepted now is served with.
    pub(super) fn current(&self) -> Arc<TlsAcceptor> {
        self.0.load()
    }
}

/// Reads `cert` and `key` into an acceptor (what a reload builds before it swaps anything).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let chain = read_chain(cert)?;
    let private_key = read_key(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let unusable = |error: rustls::Error| TlsError::Unusable {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        problem: error.to_string(),
    };
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(unusable)?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(unusable)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(path, "tls_cert")?;
    let chain = CertificateDer::pem_slice_iter(&text).collect::<Result<Vec<_>, _>>();
    let chain = chain.map_err(|error| pem_error(path, "tls_cert", &error))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(path.to_path_buf()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read(path, "tls_key")?;
    match PrivateKeyDer::from_pem_slice(&text) {
        Ok(key) => Ok(key),
        Err(rustls::pki_types::pem::Error::NoItemsFound) => Err(TlsError::NoKey(path.to_path_buf())),
        Err(error) => Err(pem_error(path, "tls_key", &error)),
    }
}

fn read(path: &Path, key: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), key, source })
}

fn pem_error(path: &Path, key: &'static str, error: &rustls::pki_types::pem::Error) -> TlsError {
    TlsError::Pem { path: path.to_path_buf(), key, problem: error.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
    }

    fn refused(cert: &Path, key: &Path) -> String {
        acceptor(cert, key).err().map(|error| error.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_certificate_and_its_key_load() {
        assert!(ServerTls::load(&fixture("tls-1.crt"), &fixture("tls-1.key")).is_ok());
    }

    #[test]
    fn each_bad_file_is_named() {
        let (cert, key, other_key) = (fixture("tls-1.crt"), fixture("tls-1.key"), fixture("tls-2.key"));
        let missing = fixture("no-such.pem");
        let message = refused(&missing, &key);
        assert!(message.starts_with(&format!("cannot read {} (`[server] tls_cert`)", missing.display())), "{message}");
        let message = refused(&cert, &missing);
        assert!(message.starts_with(&format!("cannot read {} (`[server] tls_key`)", missing.display())), "{message}");
        let message = refused(&key, &key);
        assert!(message.starts_with(&format!("{} (`[server] tls_cert`) holds no certificate", key.display())));
        let message = refused(&cert, &cert);
        assert!(message.starts_with(&format!("{} (`[server] tls_key`) holds no private key", cert.display())));
        let message = refused(&cert, &other_key);
        let expected = format!(
            "the private key {} (`[server] tls_key`) cannot serve the certificate {}",
            other_key.display(),
            cert.display()
        );
        assert!(message.starts_with(&expected), "{message}");
    }

    #[test]
    fn broken_pem_is_named() {
        let dir = std::env::temp_dir().join(format!("switchyard-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let broken = dir.join("broken.crt");
        std::fs::write(&broken, "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
        let message = refused(&broken, &fixture("tls-1.key"));
        assert!(
            message.starts_with(&format!("{} (`[server] tls_cert`) is not valid PEM", broken.display())),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
