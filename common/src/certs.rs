//! Certificates for a SplitKV cluster: one cluster CA, and node certificates
//! it signs, written as a directory tree that [`crate::tls::NodeIdentity`]
//! loads.
//!
//! [`generate_cluster`] writes, under an output directory `OUT`:
//!
//! ```text
//! OUT/ca/ca.pem            cluster CA certificate
//! OUT/ca/ca-key.pem        CA private key (0600): for whoever issues certificates only
//! OUT/storage/ca.pem       copy of the CA certificate (the trust anchor)
//! OUT/storage/cert.pem     storage-node certificate, server-auth, SANs from a name list
//! OUT/storage/key.pem      its private key (0600)
//! OUT/compute/ca.pem       copy of the CA certificate
//! OUT/compute/cert.pem     compute-node certificate, client-auth
//! OUT/compute/key.pem      its private key (0600)
//! ```
//!
//! No node directory ever receives the CA key. Keys are ECDSA P-256.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;

use crate::tls::{self, CA_FILE, CERT_FILE, KEY_FILE};

/// Directory under `OUT` holding the CA certificate and key.
pub const CA_DIR: &str = "ca";
/// File name of the CA private key inside [`CA_DIR`].
pub const CA_KEY_FILE: &str = "ca-key.pem";
/// The storage-node names callers use when the operator gives none:
/// `localhost`, `127.0.0.1`, `::1` and `storage`.
pub const DEFAULT_STORAGE_NAMES: [&str; 4] = ["localhost", "127.0.0.1", "::1", "storage"];

const CA_COMMON_NAME: &str = "SplitKV cluster CA";
const ORGANIZATION: &str = "SplitKV";
const KEY_MODE: u32 = 0o600;
const PUBLIC_MODE: u32 = 0o644;
const CA_DIR_MODE: u32 = 0o700;
const NODE_DIR_MODE: u32 = 0o755;

/// Why certificates could not be generated, issued or written.
///
/// Every variant that concerns a file names it.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file or directory could not be created, written or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
    /// A target file exists and overwriting was not requested.
    #[error("{} already exists; refusing to overwrite it (use force to replace)", path.display())]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },
    /// A server certificate was requested without any host name or address.
    #[error("a storage-node certificate needs at least one host name or IP address")]
    NoServerNames,
    /// A host name is not acceptable as a DNS subject alternative name.
    #[error("{name:?} is neither an IP address nor a valid DNS name: {source}")]
    InvalidName {
        /// The offending name.
        name: String,
        /// rcgen's objection.
        source: rcgen::Error,
    },
    /// rcgen failed to generate a key pair or sign a certificate.
    #[error("cannot generate {what}: {source}")]
    Generate {
        /// What was being generated.
        what: &'static str,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// An existing CA certificate or key could not be parsed.
    #[error("cannot use {} as CA material: {source}", path.display())]
    BadCa {
        /// The CA certificate or key file.
        path: PathBuf,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// A freshly issued certificate does not verify against the CA
    /// certificate, typically because the CA key does not belong to it.
    #[error(
        "a certificate signed with {} does not verify against {}: {source} \
         (does the key belong to that CA certificate?)",
        key.display(), cert.display()
    )]
    CaMismatch {
        /// The CA certificate file.
        cert: PathBuf,
        /// The CA key file.
        key: PathBuf,
        /// Why verification failed.
        source: rustls::Error,
    },
}

/// Which side of a link a node certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    /// The storage node: a QUIC server; its certificate has the server-auth
    /// extended key usage and the SANs it is reached by.
    Storage,
    /// A compute node: a QUIC client; its certificate has the client-auth
    /// extended key usage.
    Compute,
}

impl NodeRole {
    /// The directory name used for this role under `OUT` (`storage` or `compute`).
    pub fn dir_name(self) -> &'static str {
        match self {
            NodeRole::Storage => "storage",
            NodeRole::Compute => "compute",
        }
    }

    fn common_name(self) -> &'static str {
        match self {
            NodeRole::Storage => "SplitKV storage node",
            NodeRole::Compute => "SplitKV compute node",
        }
    }

    fn extended_key_usage(self) -> ExtendedKeyUsagePurpose {
        match self {
            NodeRole::Storage => ExtendedKeyUsagePurpose::ServerAuth,
            NodeRole::Compute => ExtendedKeyUsagePurpose::ClientAuth,
        }
    }
}

/// The directories [`generate_cluster`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLayout {
    /// `OUT/ca`: the CA certificate and its key.
    pub ca_dir: PathBuf,
    /// `OUT/storage`: everything the storage node needs, and nothing more.
    pub storage_dir: PathBuf,
    /// `OUT/compute`: everything a compute node needs, and nothing more.
    pub compute_dir: PathBuf,
}

impl ClusterLayout {
    /// The layout under `out`, without touching the file system.
    pub fn under(out: &Path) -> Self {
        Self {
            ca_dir: out.join(CA_DIR),
            storage_dir: out.join(NodeRole::Storage.dir_name()),
            compute_dir: out.join(NodeRole::Compute.dir_name()),
        }
    }

    fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.ca_dir.join(CA_FILE), self.ca_dir.join(CA_KEY_FILE)];
        files.extend(node_files(&self.storage_dir));
        files.extend(node_files(&self.compute_dir));
        files
    }
}

/// True if `out` already holds a complete set of cluster files (the CA and
/// both nodes' directories).
pub fn cluster_is_complete(out: &Path) -> bool {
    ClusterLayout::under(out)
        .files()
        .iter()
        .all(|path| path.is_file())
}

/// Creates a new cluster CA and a storage and a compute certificate signed by
/// it, and writes them under `out` as described in the [module docs](self).
///
/// `storage_names` become the storage certificate's subject alternative
/// names: strings that parse as IP addresses become IP SANs, the rest DNS
/// SANs; [`DEFAULT_STORAGE_NAMES`] is the usual choice. The compute
/// certificate has no SANs.
///
/// Guarantees: unless `force` is set, nothing is written if any of the target
/// files exists. The CA is `CA:true` with path length 0 (it can sign only
/// node certificates) and key usages certificate and CRL signing. Both node
/// certificates are checked to verify against the CA before anything is
/// written. Private keys are created with mode 0600 (never widened and then
/// narrowed), each file is written to a temporary name and renamed into place,
/// and the CA key is written only to `out/ca`.
pub fn generate_cluster<S: AsRef<str>>(
    out: &Path,
    storage_names: &[S],
    force: bool,
) -> Result<ClusterLayout, CertError> {
    let layout = ClusterLayout::under(out);
    if !force {
        refuse_existing(&layout.files())?;
    }
    let ca = Ca::generate()?;
    let no_names: &[&str] = &[];
    let storage = ca.issue(NodeRole::Storage, storage_names)?;
    let compute = ca.issue(NodeRole::Compute, no_names)?;
    let ca_paths = (layout.ca_dir.join(CA_FILE), layout.ca_dir.join(CA_KEY_FILE));
    ca.check_issued(&storage, &ca_paths.0, &ca_paths.1)?;
    ca.check_issued(&compute, &ca_paths.0, &ca_paths.1)?;

    create_dir(&layout.ca_dir, CA_DIR_MODE)?;
    write_file(&ca_paths.0, ca.cert_pem.as_bytes(), PUBLIC_MODE)?;
    write_file(
        &ca_paths.1,
        ca.issuer.key().serialize_pem().as_bytes(),
        KEY_MODE,
    )?;
    write_node(&layout.storage_dir, &ca.cert_pem, &storage)?;
    write_node(&layout.compute_dir, &ca.cert_pem, &compute)?;
    Ok(layout)
}

/// Issues one more node certificate from an existing CA directory (holding
/// `ca.pem` and `ca-key.pem`) and writes `ca.pem`, `cert.pem` and `key.pem`
/// into `node_dir`.
///
/// `names` become subject alternative names as in [`generate_cluster`]; a
/// [`NodeRole::Storage`] certificate needs at least one.
///
/// Guarantees: the same as [`generate_cluster`] for the node files; the new
/// certificate is verified against `ca_dir/ca.pem` before anything is written,
/// so a CA key that does not belong to the CA certificate is reported as
/// [`CertError::CaMismatch`]; unless `force` is set, nothing is written if
/// any of the three target files exists.
pub fn issue_node_cert<S: AsRef<str>>(
    ca_dir: &Path,
    role: NodeRole,
    names: &[S],
    node_dir: &Path,
    force: bool,
) -> Result<(), CertError> {
    if !force {
        refuse_existing(&node_files(node_dir))?;
    }
    let (cert_path, key_path) = (ca_dir.join(CA_FILE), ca_dir.join(CA_KEY_FILE));
    let ca = Ca::load(&cert_path, &key_path)?;
    let node = ca.issue(role, names)?;
    ca.check_issued(&node, &cert_path, &key_path)?;
    write_node(node_dir, &ca.cert_pem, &node)
}

/// A CA able to sign: its certificate (PEM and DER) and signing key.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
}

/// A freshly issued node certificate and its key, not yet written.
struct NodeCert {
    role: NodeRole,
    names: Vec<String>,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    key_pem: String,
}

impl Ca {
    fn generate() -> Result<Self, CertError> {
        let key = KeyPair::generate().map_err(generate_error("the CA key pair"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = distinguished_name(&ca_common_name(&params, &key));
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params
            .self_signed(&key)
            .map_err(generate_error("the CA certificate"))?;
        Ok(Self {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    fn load(cert_path: &Path, key_path: &Path) -> Result<Self, CertError> {
        let cert_pem = read_to_string(cert_path)?;
        let key_pem = read_to_string(key_path)?;
        let bad_ca = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CertError::BadCa { path, source }
        };
        let key = KeyPair::from_pem(&key_pem).map_err(bad_ca(key_path))?;
        let cert_der = cert_from_pem(&cert_pem).map_err(bad_ca(cert_path))?;
        let issuer = Issuer::from_ca_cert_der(&cert_der, key).map_err(bad_ca(cert_path))?;
        Ok(Self {
            issuer,
            cert_pem,
            cert_der,
        })
    }

    fn issue<S: AsRef<str>>(&self, role: NodeRole, names: &[S]) -> Result<NodeCert, CertError> {
        let names: Vec<String> = names.iter().map(|n| n.as_ref().to_owned()).collect();
        if role == NodeRole::Storage && names.is_empty() {
            return Err(CertError::NoServerNames);
        }
        let key = KeyPair::generate().map_err(generate_error("a node key pair"))?;
        let mut params = node_params(&names)?;
        params.distinguished_name = distinguished_name(role.common_name());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![role.extended_key_usage()];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(generate_error("a node certificate"))?;
        Ok(NodeCert {
            role,
            names,
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Checks that `node` verifies against this CA for its role (and, for a
    /// storage certificate, for its first name), as a peer would check it.
    fn check_issued(&self, node: &NodeCert, cert: &Path, key: &Path) -> Result<(), CertError> {
        verify_node_cert(
            &self.cert_der,
            &node.cert_der,
            node.role,
            node.names.first(),
        )
        .map_err(|source| CertError::CaMismatch {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            source,
        })
    }
}

/// Verifies `leaf` against the single trust anchor `ca` the way a peer of a
/// node in `role` would: as a server certificate valid for `name`, or as a
/// client certificate.
fn verify_node_cert(
    ca: &CertificateDer<'static>,
    leaf: &CertificateDer<'static>,
    role: NodeRole,
    name: Option<&String>,
) -> Result<(), rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.clone())?;
    let roots = Arc::new(roots);
    let now = UnixTime::now();
    match role {
        NodeRole::Storage => {
            let name = name.map(String::as_str).unwrap_or_default();
            let server_name = ServerName::try_from(name)
                .map_err(|e| rustls::Error::General(format!("{name:?}: {e}")))?;
            WebPkiServerVerifier::builder_with_provider(roots, tls::provider())
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?
                .verify_server_cert(leaf, &[], &server_name, &[], now)?;
        }
        NodeRole::Compute => {
            WebPkiClientVerifier::builder_with_provider(roots, tls::provider())
                .build()
                .map_err(|e| rustls::Error::General(e.to_string()))?
                .verify_client_cert(leaf, &[], now)?;
        }
    }
    Ok(())
}

fn node_params(names: &[String]) -> Result<CertificateParams, CertError> {
    // `CertificateParams::new` turns strings that parse as IP addresses into
    // IP SANs and the rest into DNS SANs; validate one at a time so the error
    // names the culprit.
    for name in names {
        CertificateParams::new(vec![name.clone()]).map_err(|source| CertError::InvalidName {
            name: name.clone(),
            source,
        })?;
    }
    CertificateParams::new(names.to_vec()).map_err(generate_error("certificate parameters"))
}

/// The CA's common name: [`CA_COMMON_NAME`] plus a short fingerprint of its
/// key, so CAs of different clusters have different subject names. (With equal
/// names, a certificate from another cluster's CA fails as a bad signature
/// rather than as an unknown issuer, which misleads whoever reads the log.)
fn ca_common_name(params: &CertificateParams, key: &KeyPair) -> String {
    let id = params.key_identifier(key);
    let hex: String = id.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{CA_COMMON_NAME} {hex}")
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, ORGANIZATION);
    dn.push(DnType::CommonName, common_name);
    dn
}

fn generate_error(what: &'static str) -> impl FnOnce(rcgen::Error) -> CertError {
    move |source| CertError::Generate { what, source }
}

fn cert_from_pem(pem: &str) -> Result<CertificateDer<'static>, rcgen::Error> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .map_err(|_| rcgen::Error::CouldNotParseCertificate)
}

fn node_files(dir: &Path) -> [PathBuf; 3] {
    [dir.join(CA_FILE), dir.join(CERT_FILE), dir.join(KEY_FILE)]
}

fn refuse_existing(files: &[PathBuf]) -> Result<(), CertError> {
    match files.iter().find(|path| path.symlink_metadata().is_ok()) {
        Some(path) => Err(CertError::AlreadyExists { path: path.clone() }),
        None => Ok(()),
    }
}

fn write_node(dir: &Path, ca_pem: &str, node: &NodeCert) -> Result<(), CertError> {
    create_dir(dir, NODE_DIR_MODE)?;
    write_file(&dir.join(CA_FILE), ca_pem.as_bytes(), PUBLIC_MODE)?;
    write_file(&dir.join(CERT_FILE), node.cert_pem.as_bytes(), PUBLIC_MODE)?;
    write_file(&dir.join(KEY_FILE), node.key_pem.as_bytes(), KEY_MODE)
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> CertError {
    let path = path.to_path_buf();
    move |source| CertError::Io { path, source }
}

fn read_to_string(path: &Path) -> Result<String, CertError> {
    fs::read_to_string(path).map_err(io_error(path))
}

/// Creates `dir` (and parents) if missing; a new leaf directory gets `mode`
/// (less the umask). An existing directory is left as it is.
fn create_dir(dir: &Path, mode: u32) -> Result<(), CertError> {
    DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(io_error(dir))
}

/// Writes `contents` to `path` via a fresh temporary file in the same
/// directory, created with `mode` (less the umask) and renamed over `path`,
/// so the final file never exists with wider permissions or partial contents.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), CertError> {
    let tmp = temporary_sibling(path);
    match fs::remove_file(&tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_error(&tmp)(e)),
        _ => {}
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io_error(&tmp))?;
    file.write_all(contents).map_err(io_error(&tmp))?;
    file.sync_all().map_err(io_error(&tmp))?;
    fs::rename(&tmp, path).map_err(io_error(path))
}

fn temporary_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::os::unix::fs::PermissionsExt;

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    fn read_der(path: &Path) -> CertificateDer<'static> {
        cert_from_pem(&fs::read_to_string(path).expect("read")).expect("parse")
    }

    fn names_in(dir: &Path) -> BTreeSet<String> {
        fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn generate(out: &Path) -> ClusterLayout {
        generate_cluster(out, &DEFAULT_STORAGE_NAMES, false).expect("generate")
    }

    #[test]
    fn writes_the_documented_layout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        assert_eq!(layout, ClusterLayout::under(dir.path()));
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(names_in(dir.path()), set(&["ca", "compute", "storage"]));
        assert_eq!(names_in(&layout.ca_dir), set(&["ca.pem", "ca-key.pem"]));
        assert_eq!(
            names_in(&layout.storage_dir),
            set(&["ca.pem", "cert.pem", "key.pem"])
        );
        assert_eq!(
            names_in(&layout.compute_dir),
            set(&["ca.pem", "cert.pem", "key.pem"])
        );
    }

    #[test]
    fn key_files_have_mode_0600() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        for key in [
            layout.ca_dir.join(CA_KEY_FILE),
            layout.storage_dir.join(KEY_FILE),
            layout.compute_dir.join(KEY_FILE),
        ] {
            assert_eq!(mode_of(&key), 0o600, "{}", key.display());
        }
        assert_eq!(mode_of(&layout.ca_dir) & 0o077, 0, "CA dir open to others");
    }

    #[test]
    fn node_dirs_do_not_contain_the_ca_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        let ca_key = fs::read(layout.ca_dir.join(CA_KEY_FILE)).expect("read CA key");
        for node_dir in [&layout.storage_dir, &layout.compute_dir] {
            assert!(!node_dir.join(CA_KEY_FILE).exists());
            for entry in fs::read_dir(node_dir).expect("read dir") {
                let path = entry.expect("entry").path();
                let contents = fs::read(&path).expect("read");
                assert_ne!(contents, ca_key, "{} is the CA key", path.display());
            }
        }
        // The node copies of ca.pem are the CA certificate itself.
        let ca_pem = fs::read(layout.ca_dir.join(CA_FILE)).expect("read CA");
        assert_eq!(
            fs::read(layout.storage_dir.join(CA_FILE)).expect("read"),
            ca_pem
        );
        assert_eq!(
            fs::read(layout.compute_dir.join(CA_FILE)).expect("read"),
            ca_pem
        );
    }

    #[test]
    fn refuses_to_overwrite_an_existing_ca_unless_forced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        let ca_path = layout.ca_dir.join(CA_FILE);
        let key_path = layout.ca_dir.join(CA_KEY_FILE);
        let first = fs::read(&ca_path).expect("read CA");

        let err = generate_cluster(dir.path(), &DEFAULT_STORAGE_NAMES, false)
            .expect_err("second run must refuse");
        assert!(matches!(err, CertError::AlreadyExists { ref path } if *path == ca_path));
        assert!(err.to_string().contains(&*ca_path.to_string_lossy()));
        assert_eq!(
            fs::read(&ca_path).expect("read CA"),
            first,
            "CA was touched"
        );

        // Widen the old key's mode: a forced run must still leave a 0600 key.
        fs::set_permissions(&key_path, fs::Permissions::from_mode(0o644)).expect("chmod");
        generate_cluster(dir.path(), &DEFAULT_STORAGE_NAMES, true).expect("forced run");
        assert_ne!(
            fs::read(&ca_path).expect("read CA"),
            first,
            "CA not replaced"
        );
        assert_eq!(mode_of(&key_path), 0o600);
    }

    #[test]
    fn refuses_when_only_node_files_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let compute_key = dir.path().join("compute").join(KEY_FILE);
        fs::create_dir_all(compute_key.parent().expect("parent")).expect("mkdir");
        fs::write(&compute_key, b"precious").expect("write");
        let err =
            generate_cluster(dir.path(), &DEFAULT_STORAGE_NAMES, false).expect_err("must refuse");
        assert!(matches!(err, CertError::AlreadyExists { ref path } if *path == compute_key));
        assert!(
            !dir.path().join(CA_DIR).exists(),
            "wrote a CA before refusing"
        );
    }

    #[test]
    fn storage_certificate_is_valid_for_exactly_its_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        let ca = read_der(&layout.ca_dir.join(CA_FILE));
        let storage = read_der(&layout.storage_dir.join(CERT_FILE));
        for name in DEFAULT_STORAGE_NAMES {
            verify_node_cert(&ca, &storage, NodeRole::Storage, Some(&name.to_string()))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        for name in ["compute", "10.0.0.1", "::2", "example.com"] {
            let result = verify_node_cert(&ca, &storage, NodeRole::Storage, Some(&name.into()));
            assert!(result.is_err(), "storage cert accepted for {name}");
        }
    }

    #[test]
    fn certificates_are_only_valid_for_their_role() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(dir.path());
        let ca = read_der(&layout.ca_dir.join(CA_FILE));
        let storage = read_der(&layout.storage_dir.join(CERT_FILE));
        let compute = read_der(&layout.compute_dir.join(CERT_FILE));
        let localhost = "localhost".to_string();
        verify_node_cert(&ca, &compute, NodeRole::Compute, None).expect("compute as client");
        assert!(verify_node_cert(&ca, &storage, NodeRole::Compute, None).is_err());
        assert!(verify_node_cert(&ca, &compute, NodeRole::Storage, Some(&localhost)).is_err());
    }

    #[test]
    fn invalid_names_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = generate_cluster(dir.path(), &["ok", "bad\u{e9}name"], false)
            .expect_err("non-ASCII DNS name");
        assert!(matches!(err, CertError::InvalidName { ref name, .. } if name == "bad\u{e9}name"));
        let empty: &[&str] = &[];
        let err = generate_cluster(dir.path(), empty, false).expect_err("no names");
        assert!(matches!(err, CertError::NoServerNames));
        assert!(!dir.path().join(CA_DIR).exists());
    }

    #[test]
    fn issues_more_node_certificates_from_an_existing_ca() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = generate(&dir.path().join("a"));
        let node_dir = dir.path().join("compute-2");
        let no_names: &[&str] = &[];
        issue_node_cert(
            &layout.ca_dir,
            NodeRole::Compute,
            no_names,
            &node_dir,
            false,
        )
        .expect("issue");
        assert_eq!(mode_of(&node_dir.join(KEY_FILE)), 0o600);
        let ca = read_der(&layout.ca_dir.join(CA_FILE));
        let leaf = read_der(&node_dir.join(CERT_FILE));
        verify_node_cert(&ca, &leaf, NodeRole::Compute, None).expect("chains to the CA");
        assert_ne!(leaf, read_der(&layout.compute_dir.join(CERT_FILE)));

        let err = issue_node_cert(
            &layout.ca_dir,
            NodeRole::Compute,
            no_names,
            &node_dir,
            false,
        )
        .expect_err("must not overwrite");
        assert!(matches!(err, CertError::AlreadyExists { .. }));

        let storage_dir = dir.path().join("storage-2");
        issue_node_cert(
            &layout.ca_dir,
            NodeRole::Storage,
            &["db.internal"],
            &storage_dir,
            false,
        )
        .expect("issue storage");
        let leaf = read_der(&storage_dir.join(CERT_FILE));
        verify_node_cert(&ca, &leaf, NodeRole::Storage, Some(&"db.internal".into()))
            .expect("valid for its name");
    }

    #[test]
    fn issuing_with_a_foreign_ca_key_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = generate(&dir.path().join("a"));
        let b = generate(&dir.path().join("b"));
        let mixed = dir.path().join("mixed");
        fs::create_dir(&mixed).expect("mkdir");
        fs::copy(a.ca_dir.join(CA_FILE), mixed.join(CA_FILE)).expect("copy");
        fs::copy(b.ca_dir.join(CA_KEY_FILE), mixed.join(CA_KEY_FILE)).expect("copy");
        let node_dir = dir.path().join("node");
        let no_names: &[&str] = &[];
        let err = issue_node_cert(&mixed, NodeRole::Compute, no_names, &node_dir, false)
            .expect_err("key does not belong to the CA");
        assert!(matches!(err, CertError::CaMismatch { .. }), "{err:?}");
        assert!(!node_dir.exists(), "wrote files despite the mismatch");
    }
}
