//! TLS with rustls (TLS 1.2 and 1.3 only, ring's cipher suites): the server's certificate and
//! key from one PEM file (`--tlsCertificateKeyFile`, as mongod takes it), client certificates
//! checked against `--tlsCAFile` when given (required unless
//! `--tlsAllowConnectionsWithoutCertificates`), and the mode: `requireTLS` refuses plain
//! clients, `preferTLS`/`allowTLS` accept both (a client speaking TLS is recognized by its first
//! bytes, a TLS handshake record), `disabled` never speaks TLS.
//!
//! A replica set's members speak TLS to each other with `preferTLS` and `requireTLS` (as
//! mongod): the connecting member checks the other's certificate and host name against
//! `--tlsClusterCAFile` (else `--tlsCAFile`) and presents `--tlsClusterFile` (else its server
//! certificate), which with `--clusterAuthMode x509` is also how it proves it is a member
//! ([`member_attributes`]).
//!
//! The configuration is rebuilt from the same files by `rotateCertificates`; connections opened
//! after it use the new one, open ones keep theirs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

/// `--tlsMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disabled,
    AllowTls,
    PreferTls,
    RequireTls,
}

impl TlsMode {
    pub fn parse(text: &str) -> Option<TlsMode> {
        match text {
            "disabled" => Some(TlsMode::Disabled),
            "allowTLS" => Some(TlsMode::AllowTls),
            "preferTLS" => Some(TlsMode::PreferTls),
            "requireTLS" => Some(TlsMode::RequireTls),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// Where the server's TLS material comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    /// PEM: the certificate chain and the private key.
    pub certificate_key_file: PathBuf,
    /// PEM: the CAs that sign client certificates.
    pub ca_file: Option<PathBuf>,
    pub allow_connections_without_certificates: bool,
    /// PEM: the certificate and key this member presents to the others (`--tlsClusterFile`);
    /// `None`: the server's own.
    pub cluster_file: Option<PathBuf>,
    /// PEM: the CAs that sign the other members' certificates (`--tlsClusterCAFile`); `None`:
    /// `ca_file`.
    pub cluster_ca_file: Option<PathBuf>,
}

/// What the binary passes in: the mode and the files.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub files: TlsFiles,
}

/// The server's TLS state: its mode and current rustls configuration.
pub struct Tls {
    pub mode: TlsMode,
    files: TlsFiles,
    config: RwLock<Arc<ServerConfig>>,
}

impl Tls {
    /// Reads the files; an error says which file and why.
    pub fn load(options: TlsOptions) -> Result<Tls, String> {
        let config = RwLock::new(Arc::new(server_config(&options.files)?));
        Ok(Tls { mode: options.mode, files: options.files, config })
    }

    /// Re-reads the files (`rotateCertificates`); on error the current configuration stays.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = Arc::new(server_config(&self.files)?);
        *self.config.write().unwrap_or_else(|poison| poison.into_inner()) = fresh;
        Ok(())
    }

    /// A TLS session for a new connection.
    pub fn accept(&self) -> Result<rustls::ServerConnection, String> {
        let config = self.config.read().unwrap_or_else(|poison| poison.into_inner()).clone();
        rustls::ServerConnection::new(config).map_err(|error| error.to_string())
    }

    /// True if a new connection must (or, its first bytes `peeked` say, does) speak TLS.
    pub fn expects_tls(&self, peeked: &[u8]) -> bool {
        match self.mode {
            TlsMode::Disabled => false,
            TlsMode::RequireTls => true,
            // A TLS record starts with its content type (22, handshake) and a 3.x version;
            // a MongoDB message starts with its length, little-endian.
            TlsMode::AllowTls | TlsMode::PreferTls => matches!(peeked, [0x16, 0x03, ..]),
        }
    }
}

fn server_config(files: &TlsFiles) -> Result<ServerConfig, String> {
    let (certificates, key) = read_certificate_and_key(&files.certificate_key_file)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(PROTOCOL_VERSIONS)
        .map_err(|error| error.to_string())?;
    let builder = match &files.ca_file {
        None => builder.with_no_client_auth(),
        Some(ca_file) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(read_roots(ca_file)?), provider);
            let verifier =
                if files.allow_connections_without_certificates { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(verifier.build().map_err(|error| error.to_string())?)
        }
    };
    builder
        .with_single_cert(certificates, key)
        .map_err(|error| format!("{}: {error}", files.certificate_key_file.display()))
}

const PROTOCOL_VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

/// The certificate chain and private key of a PEM file; an error says which file and why.
fn read_certificate_and_key(path: &Path) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let read_error = |what: &str, error: &dyn std::fmt::Display| format!("{what} {}: {error}", path.display());
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|error| read_error("cannot read the certificates of", &error))?
        .collect::<Result<_, _>>()
        .map_err(|error| read_error("cannot parse the certificates of", &error))?;
    if certificates.is_empty() {
        return Err(format!("{} holds no certificate", path.display()));
    }
    let key =
        PrivateKeyDer::from_pem_file(path).map_err(|error| read_error("cannot read the private key of", &error))?;
    Ok((certificates, key))
}

/// The CAs of a PEM file.
fn read_roots(ca_file: &Path) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(ca_file)
        .map_err(|error| format!("cannot read the CA file {}: {error}", ca_file.display()))?;
    for ca in cas {
        let ca = ca.map_err(|error| format!("cannot parse the CA file {}: {error}", ca_file.display()))?;
        roots.add(ca).map_err(|error| format!("a certificate of {} is not a CA: {error}", ca_file.display()))?;
    }
    Ok(roots)
}

impl TlsOptions {
    /// True if this member's connections to the other members speak TLS: as mongod, with
    /// `preferTLS` or `requireTLS` (with `allowTLS` they do not).
    pub fn between_members(&self) -> bool {
        matches!(self.mode, TlsMode::PreferTls | TlsMode::RequireTls)
    }

    /// The PEM file this member presents to the others: `--tlsClusterFile`, else its own
    /// server certificate.
    pub fn member_certificate_file(&self) -> &Path {
        self.files.cluster_file.as_deref().unwrap_or(&self.files.certificate_key_file)
    }

    /// rustls's client side for connections to the other members: their certificates are
    /// checked against `--tlsClusterCAFile` (else `--tlsCAFile`) and their host names, and this
    /// member presents its cluster certificate.
    pub fn member_client_config(&self) -> Result<rustls::ClientConfig, String> {
        let Some(ca_file) = self.files.cluster_ca_file.as_ref().or(self.files.ca_file.as_ref()) else {
            return Err("members check each other's certificates: TLS between members needs --tlsCAFile".into());
        };
        let (certificates, key) = read_certificate_and_key(self.member_certificate_file())?;
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(|error| error.to_string())?
            .with_root_certificates(read_roots(ca_file)?)
            .with_client_auth_cert(certificates, key)
            .map_err(|error| format!("{}: {error}", self.member_certificate_file().display()))
    }

    /// The attributes that make a certificate a member's ([`member_attributes`] of this
    /// member's own certificate).
    pub fn own_member_attributes(&self) -> Result<Vec<(String, String)>, String> {
        let (certificates, _) = read_certificate_and_key(self.member_certificate_file())?;
        let der = certificates.first().ok_or("no certificate")?;
        identity(der)
            .map(|(_, attributes)| attributes)
            .ok_or_else(|| format!("{}: the certificate does not parse", self.member_certificate_file().display()))
    }
}

/// A certificate (DER) parsed once: its [`subject_name`] and its [`member_attributes`]. `None`
/// if it does not parse.
pub fn identity(der: &[u8]) -> Option<(String, Vec<(String, String)>)> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    Some((subject_name(certificate.subject()), member_attributes(certificate.subject())))
}

/// The attributes of a certificate's subject that say which cluster it belongs to, as mongod
/// compares them for X.509 membership: its organizations (O), organizational units (OU) and
/// domain components (DC), sorted. Two certificates with the same non-empty list belong to
/// members of one cluster.
fn member_attributes(subject: &x509_parser::x509::X509Name<'_>) -> Vec<(String, String)> {
    let mut attributes: Vec<(String, String)> = subject
        .iter_attributes()
        .filter_map(|attribute| {
            let name = attribute_name(attribute.attr_type());
            let value = attribute.as_str().ok()?.to_owned();
            matches!(name.as_str(), "O" | "OU" | "DC").then_some((name, value))
        })
        .collect();
    attributes.sort();
    attributes
}

/// A certificate's subject as MongoDB names an X.509 user: RFC 4514, the relative names from
/// last to first joined by ',', attributes of one name by '+', with the special characters
/// escaped ("CN=client,OU=eng,O=Example,C=US").
fn subject_name(subject: &x509_parser::x509::X509Name<'_>) -> String {
    let names: Vec<String> = subject
        .iter_rdn()
        .map(|rdn| {
            let attributes: Vec<String> = rdn
                .iter()
                .map(|attribute| {
                    let value = match attribute.as_str() {
                        Ok(text) => text.to_owned(),
                        Err(_) => String::from_utf8_lossy(attribute.as_slice()).into_owned(),
                    };
                    format!("{}={}", attribute_name(attribute.attr_type()), escape_value(&value))
                })
                .collect();
            attributes.join("+")
        })
        .collect();
    names.into_iter().rev().collect::<Vec<_>>().join(",")
}

/// RFC 4514's short names, as OpenSSL and MongoDB print them; other attributes by OID.
fn attribute_name(oid: &x509_parser::der_parser::oid::Oid<'_>) -> String {
    let dotted = oid.to_id_string();
    let name = match dotted.as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return dotted,
    };
    name.to_owned()
}

/// RFC 4514 escaping of an attribute value.
fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (position, character) in value.chars().enumerate() {
        let special = matches!(character, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (position == 0 && matches!(character, '#' | ' '))
            || (position == last && character == ' ');
        if special {
            out.push('\\');
        }
        out.push(character);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        assert_eq!(escape_value("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_value(" #x "), "\\ #x\\ ");
        assert_eq!(escape_value("plain"), "plain");
    }

    #[test]
    fn modes_parse_and_detect_tls() {
        assert_eq!(TlsMode::parse("requireTLS"), Some(TlsMode::RequireTls));
        assert_eq!(TlsMode::parse("sslOnly"), None);
        let files = TlsFiles {
            certificate_key_file: "/nonexistent.pem".into(),
            ca_file: None,
            allow_connections_without_certificates: false,
            cluster_file: None,
            cluster_ca_file: None,
        };
        let error = Tls::load(TlsOptions { mode: TlsMode::RequireTls, files }).err().unwrap();
        assert!(error.contains("/nonexistent.pem"), "{error}");
    }
}
