//! Mutual TLS for the links between nodes, and the certificates they use.
//!
//! Every QUIC connection between SplitKV nodes runs TLS 1.3 (the only version
//! QUIC allows) with the *ring* crypto provider chosen explicitly, ALPN
//! [`ALPN_PROTOCOL`], and certificates on both sides that chain to the cluster
//! CA. A node's credentials are a directory holding `ca.pem`, `cert.pem` and
//! `key.pem` (see [`crate::certs`] for how they are made); [`NodeIdentity`]
//! loads one and builds the quinn server or client configuration from it.

use std::fmt;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use quinn::crypto::rustls::{NoInitialCipherSuite, QuicClientConfig, QuicServerConfig};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};

/// The ALPN protocol name every SplitKV node offers and requires.
///
/// A peer that does not offer exactly this protocol fails the handshake.
pub const ALPN_PROTOCOL: &[u8] = b"splitkv/1";

/// File name of the cluster CA certificate inside a node directory.
pub const CA_FILE: &str = "ca.pem";
/// File name of the node's own certificate (chain) inside a node directory.
pub const CERT_FILE: &str = "cert.pem";
/// File name of the node's private key inside a node directory.
pub const KEY_FILE: &str = "key.pem";

/// Why a node's TLS credentials could not be loaded or turned into a config.
///
/// Every variant names the file (or files) involved.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A credential file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A credential file is not well-formed PEM.
    #[error("{} is not valid PEM: {source}", path.display())]
    Pem {
        /// The malformed file.
        path: PathBuf,
        /// What the PEM parser objected to.
        source: pem::Error,
    },
    /// A certificate file holds no `CERTIFICATE` block.
    #[error("{} contains no certificate", path.display())]
    NoCertificate {
        /// The file without a certificate.
        path: PathBuf,
    },
    /// A key file holds no private key block (PKCS#8, PKCS#1 or SEC1).
    #[error("{} contains no private key", path.display())]
    NoPrivateKey {
        /// The file without a private key.
        path: PathBuf,
    },
    /// A CA certificate cannot serve as a trust anchor.
    #[error("CA certificate in {} is not a usable trust anchor: {source}", path.display())]
    BadCa {
        /// The CA file.
        path: PathBuf,
        /// Why rustls refused it.
        source: rustls::Error,
    },
    /// The client-certificate verifier could not be built from the CA file.
    #[error("cannot verify client certificates against {}: {source}", path.display())]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// Why the verifier could not be built.
        source: VerifierBuilderError,
    },
    /// The node certificate and key were refused (for example, they do not match).
    #[error("certificate {} with key {} refused: {source}", cert.display(), key.display())]
    Identity {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why rustls refused them.
        source: rustls::Error,
    },
    /// The crypto provider does not support TLS 1.3 (cannot happen with *ring*).
    #[error("TLS 1.3 is not available from the crypto provider: {0}")]
    Protocol(rustls::Error),
    /// The TLS configuration lacks the cipher suite QUIC needs for its initial packets.
    #[error("TLS configuration is not usable for QUIC: {0}")]
    Quic(NoInitialCipherSuite),
}

/// A node's TLS credentials: the cluster CA it trusts, its certificate chain
/// and its private key.
///
/// Guarantees: a loaded identity holds at least one CA certificate accepted as
/// a trust anchor, at least one node certificate, and one private key. Whether
/// key and certificate belong together is checked when a config is built.
/// The `Debug` output never shows the private key.
pub struct NodeIdentity {
    ca_path: PathBuf,
    cert_path: PathBuf,
    key_path: PathBuf,
    roots: Arc<RootCertStore>,
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl fmt::Debug for NodeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("ca_path", &self.ca_path)
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("trust_anchors", &self.roots.len())
            .field("cert_chain_len", &self.cert_chain.len())
            .finish_non_exhaustive()
    }
}

impl NodeIdentity {
    /// Loads `dir/ca.pem`, `dir/cert.pem` and `dir/key.pem`.
    ///
    /// Succeeds only if all three files parse as described on [`NodeIdentity`];
    /// otherwise the error names the offending file. Logs a warning (but still
    /// loads) if the key file is readable by group or others.
    pub fn load(dir: &Path) -> Result<Self, TlsError> {
        Self::from_files(
            &dir.join(CA_FILE),
            &dir.join(CERT_FILE),
            &dir.join(KEY_FILE),
        )
    }

    /// Loads the CA certificate(s), node certificate chain and private key
    /// from three explicit files, with the same guarantees as [`Self::load`].
    ///
    /// Every certificate in `ca` becomes a trust anchor; `cert` holds the node
    /// certificate first, followed by any intermediates.
    pub fn from_files(ca: &Path, cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let roots = read_roots(ca)?;
        let cert_chain = read_certs(cert)?;
        let private_key = read_key(key)?;
        Ok(Self {
            ca_path: ca.to_path_buf(),
            cert_path: cert.to_path_buf(),
            key_path: key.to_path_buf(),
            roots: Arc::new(roots),
            cert_chain,
            key: private_key,
        })
    }

    /// The node's own certificate chain, leaf first, as loaded.
    pub fn cert_chain(&self) -> &[CertificateDer<'static>] {
        &self.cert_chain
    }

    /// The key a server endpoint derives its stateless-reset tokens from,
    /// derived from this node's private key, so it is secret and the same
    /// across restarts. A node that restarts after a crash can then tell
    /// clients still holding connections to its previous run that those are
    /// gone (a stateless reset they can verify), and they reconnect at once
    /// instead of waiting for an idle timeout.
    pub fn stateless_reset_key(&self) -> Arc<ring::hmac::Key> {
        let digest = self.derive(b"splitkv stateless reset key v1");
        Arc::new(ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            digest.as_ref(),
        ))
    }

    /// The key of a server's connection-ID generator, derived like
    /// [`NodeIdentity::stateless_reset_key`]: a restarted node recognises the
    /// connection IDs it handed out before, which it must to answer packets
    /// for them with a stateless reset.
    pub fn connection_id_key(&self) -> u64 {
        let digest = self.derive(b"splitkv connection id key v1");
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest.as_ref()[..8]);
        u64::from_le_bytes(bytes)
    }

    fn derive(&self, label: &[u8]) -> ring::digest::Digest {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(label);
        ctx.update(self.key.secret_der());
        ctx.finish()
    }

    /// Builds the configuration for a QUIC server endpoint (the storage node).
    ///
    /// Guarantees: TLS 1.3 only, *ring* provider, ALPN [`ALPN_PROTOCOL`] only,
    /// no 0-RTT; the server presents this identity's certificate, and every
    /// client must present a certificate that chains to this identity's CA and
    /// carries the client-auth extended key usage, or the handshake fails
    /// before the server accepts the connection. `transport` is used as given.
    pub fn server_config(
        &self,
        transport: Arc<quinn::TransportConfig>,
    ) -> Result<quinn::ServerConfig, TlsError> {
        let verifier = WebPkiClientVerifier::builder_with_provider(self.roots.clone(), provider())
            .build()
            .map_err(|source| TlsError::Verifier {
                path: self.ca_path.clone(),
                source,
            })?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(TlsError::Protocol)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|source| self.identity_error(source))?;
        tls.alpn_protocols = vec![ALPN_PROTOCOL.to_vec()];
        let quic = QuicServerConfig::try_from(tls).map_err(TlsError::Quic)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
        config.transport_config(transport);
        Ok(config)
    }

    /// Builds the configuration for a QUIC client endpoint (a compute node).
    ///
    /// Guarantees: TLS 1.3 only, *ring* provider, ALPN [`ALPN_PROTOCOL`] only,
    /// no 0-RTT; the client trusts only this identity's CA (no system roots),
    /// requires the server certificate to carry the server-auth extended key
    /// usage and to match the server name passed to `connect`, and presents
    /// this identity's certificate. `transport` is used as given.
    pub fn client_config(
        &self,
        transport: Arc<quinn::TransportConfig>,
    ) -> Result<quinn::ClientConfig, TlsError> {
        let tls = client_builder(self.roots.clone())?
            .with_client_auth_cert(self.cert_chain.clone(), self.key.clone_key())
            .map_err(|source| self.identity_error(source))?;
        quic_client_config(tls, transport)
    }

    fn identity_error(&self, source: rustls::Error) -> TlsError {
        TlsError::Identity {
            cert: self.cert_path.clone(),
            key: self.key_path.clone(),
            source,
        }
    }
}

/// A client configuration that trusts the cluster CA in `ca` but presents no
/// certificate of its own: a storage node completes its side of the
/// handshake with it (proving it is up and is who it claims) and then
/// refuses the connection. Used only for health probes.
pub fn anonymous_client_config(
    ca: &Path,
    transport: Arc<quinn::TransportConfig>,
) -> Result<quinn::ClientConfig, TlsError> {
    let tls = client_builder(read_roots(ca)?)?.with_no_client_auth();
    quic_client_config(tls, transport)
}

/// A TLS 1.3 client configuration with the *ring* provider trusting only
/// `roots`, up to the choice of client certificate.
fn client_builder(
    roots: impl Into<Arc<RootCertStore>>,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, TlsError>
{
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(TlsError::Protocol)?
        .with_root_certificates(roots))
}

/// The QUIC client configuration for `tls`, offering only [`ALPN_PROTOCOL`].
fn quic_client_config(
    mut tls: rustls::ClientConfig,
    transport: Arc<quinn::TransportConfig>,
) -> Result<quinn::ClientConfig, TlsError> {
    tls.alpn_protocols = vec![ALPN_PROTOCOL.to_vec()];
    let quic = QuicClientConfig::try_from(tls).map_err(TlsError::Quic)?;
    let mut config = quinn::ClientConfig::new(Arc::new(quic));
    config.transport_config(transport);
    Ok(config)
}

/// The crypto provider every SplitKV TLS config uses: *ring*, chosen
/// explicitly rather than through the process-wide default.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(path: &Path, source: pem::Error) -> TlsError {
    TlsError::Pem {
        path: path.to_path_buf(),
        source,
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read_file(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| pem_error(path, source))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|source| TlsError::BadCa {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(roots)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    warn_if_key_exposed(path);
    let bytes = read_file(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|source| match source {
        pem::Error::NoItemsFound => TlsError::NoPrivateKey {
            path: path.to_path_buf(),
        },
        other => pem_error(path, other),
    })
}

fn warn_if_key_exposed(path: &Path) {
    if let Ok(meta) = fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format_args!("{mode:o}"),
                "private key file is readable by group or others; it should be mode 600"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::{self, ClusterLayout, DEFAULT_STORAGE_NAMES};

    fn cluster(dir: &tempfile::TempDir, name: &str) -> ClusterLayout {
        certs::generate_cluster(&dir.path().join(name), &DEFAULT_STORAGE_NAMES, false)
            .expect("generate cluster certificates")
    }

    fn transport() -> Arc<quinn::TransportConfig> {
        Arc::new(quinn::TransportConfig::default())
    }

    #[test]
    fn load_names_the_missing_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = NodeIdentity::load(dir.path()).expect_err("empty dir must not load");
        let message = err.to_string();
        assert!(matches!(err, TlsError::Read { .. }), "{err:?}");
        assert!(
            message.contains(&*dir.path().join(CA_FILE).to_string_lossy()),
            "{message}"
        );
    }

    #[test]
    fn load_refuses_a_file_without_a_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = cluster(&dir, "a");
        // cert.pem holds a certificate, not a key.
        let err = NodeIdentity::from_files(
            &layout.compute_dir.join(CA_FILE),
            &layout.compute_dir.join(CERT_FILE),
            &layout.compute_dir.join(CERT_FILE),
        )
        .expect_err("a certificate is not a key");
        assert!(matches!(err, TlsError::NoPrivateKey { ref path } if path.ends_with(CERT_FILE)));
    }

    #[test]
    fn mismatched_key_is_refused_naming_both_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = cluster(&dir, "a");
        let identity = NodeIdentity::from_files(
            &layout.compute_dir.join(CA_FILE),
            &layout.compute_dir.join(CERT_FILE),
            &layout.storage_dir.join(KEY_FILE),
        )
        .expect("files parse");
        let err = identity
            .client_config(transport())
            .expect_err("key does not match");
        let message = err.to_string();
        assert!(matches!(err, TlsError::Identity { .. }), "{err:?}");
        assert!(
            message.contains("compute") && message.contains("storage"),
            "{message}"
        );
    }
}
