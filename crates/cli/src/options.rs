//! Server options: command-line flags, an optional mongod.conf-style YAML file, and the
//! defaults, merged in that order of precedence.
//!
//! YAML keys read (as in mongod.conf): `storage.dbPath`, `storage.wiredTiger.engineConfig.
//! cacheSizeGB` (a number of GB, as mongod takes it), `storage.cacheSize` (Strata's own, e.g.
//! "128MiB"), `storage.compression` (Strata's own: none, lz4, zstd, zstd:LEVEL),
//! `storage.wiredTiger.collectionConfig.blockCompressor` (snappy read as lz4, zlib as zstd), `net.port`, `net.bindIp` (the first address of a comma-separated list),
//! `net.maxIncomingConnections`, `security.authorization` ("enabled"/"disabled"), `security.keyFile`, `security.clusterAuthMode`, `systemLog.destination`/`systemLog.path`,
//! `operationProfiling.slowOpThresholdMs`, `net.http.port`, `net.tls.mode`, `net.tls.certificateKeyFile`,
//! `net.tls.CAFile`, `net.tls.allowConnectionsWithoutCertificates`, `net.tls.clusterFile`, `net.tls.clusterCAFile`, `replication.replSetName`,
//! `replication.oplogSizeMB`. Unknown keys are ignored, so a real mongod.conf loads.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use serde::Deserialize;

// One size syntax for the whole binary: `strata serve --cache-size` and `strata bench` alike.
use bench::size::parse_size;

pub const DEFAULT_CACHE_SIZE_BYTES: u64 = 128 * 1024 * 1024;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Directory holding the data files (created if missing).
    #[arg(long)]
    pub dbpath: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    pub bind: Option<String>,
    /// Port to listen on (0 picks a free port; the chosen one is printed).
    #[arg(long)]
    pub port: Option<u16>,
    /// Storage cache budget, e.g. 128MiB, 2GiB, 500MB or a number of bytes.
    #[arg(long)]
    pub cache_size: Option<String>,
    /// How node blocks are compressed on disk: lz4 (fastest), zstd (smaller files; zstd:LEVEL
    /// for another level than 3, up to 22), or none, for every tree. Without it, documents are
    /// compressed with zstd:1 and indexes with lz4. A collection's or an index's own
    /// `storageEngine` option comes first; blocks written earlier keep theirs until rewritten.
    #[arg(long)]
    pub compression: Option<String>,
    /// Most client connections at once.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Serve metrics (/metrics), health (/healthz) and the dashboard (/) over HTTP on this
    /// port, on the same address as the main port (0 picks a free one).
    #[arg(long)]
    pub http_port: Option<u16>,
    /// Log lines as mongod writes them: json (the default) or text.
    #[arg(long = "logFormat")]
    pub log_format: Option<String>,
    /// Write the log to this file instead of stderr (rotated by logRotate and SIGUSR1).
    #[arg(long)]
    pub logpath: Option<PathBuf>,
    /// Log commands slower than this many milliseconds (default 100).
    #[arg(long)]
    pub slowms: Option<u64>,
    /// Require authentication: clients must log in, and may do only what their roles grant
    /// (create the first user from localhost, or before turning this on).
    #[arg(long)]
    pub auth: bool,
    /// The replica set's shared key (6 to 1024 base64 characters; readable by its owner only):
    /// members prove themselves to each other with it, as mongod's `--keyFile`. Implies `--auth`.
    #[arg(long = "keyFile")]
    pub key_file: Option<PathBuf>,
    /// How members prove themselves to each other: keyFile (the default), x509 (their TLS
    /// certificates, whose O, OU and DC must equal this member's; needs --tlsMode preferTLS or
    /// requireTLS), or sendKeyFile / sendX509 (send one, accept both, for switching a running
    /// set over). Anything but keyFile implies `--auth`.
    #[arg(long = "clusterAuthMode")]
    pub cluster_auth_mode: Option<String>,
    /// TLS: disabled, allowTLS, preferTLS or requireTLS.
    #[arg(long = "tlsMode")]
    pub tls_mode: Option<String>,
    /// PEM file with the server's certificate chain and private key.
    #[arg(long = "tlsCertificateKeyFile")]
    pub tls_certificate_key_file: Option<PathBuf>,
    /// PEM file with the CAs that sign client certificates (asks clients for one).
    #[arg(long = "tlsCAFile")]
    pub tls_ca_file: Option<PathBuf>,
    /// With --tlsCAFile: accept TLS clients that present no certificate.
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    pub tls_allow_connections_without_certificates: bool,
    /// PEM file with the certificate and key this member presents to the other members
    /// (default: --tlsCertificateKeyFile).
    #[arg(long = "tlsClusterFile")]
    pub tls_cluster_file: Option<PathBuf>,
    /// PEM file with the CAs that sign the other members' certificates (default: --tlsCAFile).
    #[arg(long = "tlsClusterCAFile")]
    pub tls_cluster_ca_file: Option<PathBuf>,
    /// Run as a replica set of this name (one member; initiate it with rs.initiate()):
    /// an oplog, cluster times, and what drivers offer only to replica sets.
    #[arg(long = "replSet")]
    pub repl_set: Option<String>,
    /// The oplog's size cap in megabytes (default 990).
    #[arg(long = "oplogSizeMB")]
    pub oplog_size_mb: Option<u64>,
    /// A server parameter, NAME=VALUE (repeatable): enableTestCommands=1 (test commands such as
    /// configureFailPoint, as in mongod), transactionLifetimeLimitSeconds=N (default 60).
    #[arg(long = "setParameter")]
    pub set_parameter: Vec<String>,
    /// YAML configuration file with mongod.conf's key names.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The options after merging, with every value decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub dbpath: PathBuf,
    pub bind: String,
    pub port: u16,
    pub cache_size_bytes: u64,
    /// `--compression`: one method for every tree; `None` for the defaults (documents zstd:1,
    /// everything else lz4).
    pub compression: Option<storage::Compression>,
    pub max_connections: usize,
    pub auth: bool,
    /// `--keyFile`'s key (its contents, whitespace removed).
    pub key: Option<String>,
    pub cluster_auth_mode: server::ClusterAuthMode,
    pub tls: Option<server::tls::TlsOptions>,
    pub http_port: Option<u16>,
    pub log_format: server::logging::LogFormat,
    pub log_path: Option<PathBuf>,
    pub slow_ms: u64,
    pub repl_set: Option<String>,
    pub oplog_size_mb: u64,
    pub test_commands: bool,
    pub transaction_lifetime_seconds: u64,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    #[serde(default)]
    storage: StorageSection,
    #[serde(default)]
    net: NetSection,
    #[serde(default)]
    security: SecuritySection,
    #[serde(default)]
    system_log: SystemLogSection,
    #[serde(default)]
    operation_profiling: OperationProfilingSection,
    #[serde(default)]
    replication: ReplicationSection,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct ReplicationSection {
    repl_set_name: Option<String>,
    #[serde(rename = "oplogSizeMB")]
    oplog_size_mb: Option<u64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct SystemLogSection {
    /// "file" (with `path`) or "syslog" (not supported: stderr is used).
    destination: Option<String>,
    path: Option<PathBuf>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct OperationProfilingSection {
    slow_op_threshold_ms: Option<u64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct SecuritySection {
    /// "enabled" or "disabled", as in mongod.conf.
    authorization: Option<String>,
    key_file: Option<PathBuf>,
    cluster_auth_mode: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct StorageSection {
    db_path: Option<PathBuf>,
    cache_size: Option<String>,
    compression: Option<String>,
    wired_tiger: Option<WiredTigerSection>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct WiredTigerSection {
    engine_config: Option<EngineConfigSection>,
    collection_config: Option<CollectionConfigSection>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct CollectionConfigSection {
    block_compressor: Option<String>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct EngineConfigSection {
    #[serde(rename = "cacheSizeGB")]
    cache_size_gb: Option<f64>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct NetSection {
    port: Option<u16>,
    bind_ip: Option<String>,
    max_incoming_connections: Option<usize>,
    tls: Option<TlsSection>,
    http: Option<HttpSection>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct HttpSection {
    port: Option<u16>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct TlsSection {
    mode: Option<String>,
    certificate_key_file: Option<PathBuf>,
    #[serde(rename = "CAFile")]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    allow_connections_without_certificates: bool,
    cluster_file: Option<PathBuf>,
    #[serde(rename = "clusterCAFile")]
    cluster_ca_file: Option<PathBuf>,
}

impl ServeArgs {
    /// Merge flags over the config file over the defaults.
    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        let file = match &self.config {
            Some(path) => load(path)?,
            None => ConfigFile::default(),
        };
        let cache_from_file = match (&file.storage.cache_size, gigabytes(&file.storage)) {
            (Some(text), _) => Some(parse_size(text)?),
            (None, Some(gb)) => Some((gb * 1024.0 * 1024.0 * 1024.0) as u64),
            (None, None) => None,
        };
        let cache_size_bytes = match &self.cache_size {
            Some(text) => parse_size(text)?,
            None => cache_from_file.unwrap_or(DEFAULT_CACHE_SIZE_BYTES),
        };
        let compression = match (&self.compression, block_compressor(&file.storage)) {
            (Some(text), _) => Some(parse_compression(text)?),
            (None, Some(text)) => Some(parse_compression(&text)?),
            (None, None) => None,
        };
        let bind_from_file = file
            .net
            .bind_ip
            .as_deref()
            .and_then(|list| list.split(',').map(str::trim).find(|ip| !ip.is_empty()))
            .map(str::to_owned);
        let key = match self.key_file.clone().or(file.security.key_file.clone()) {
            Some(path) => Some(read_key_file(&path)?),
            None => None,
        };
        let auth_from_file = match file.security.authorization.as_deref() {
            None | Some("disabled") => false,
            Some("enabled") => true,
            Some(other) => bail!("security.authorization must be \"enabled\" or \"disabled\", not {other:?}"),
        };
        let tls = self.tls(file.net.tls.unwrap_or_default())?;
        let cluster_auth_mode = cluster_auth_mode(
            self.cluster_auth_mode.as_deref().or(file.security.cluster_auth_mode.as_deref()),
            key.is_some(),
            tls.as_ref(),
        )?;
        let log_format = match self.log_format.as_deref() {
            None => server::logging::LogFormat::Json,
            Some(text) => match server::logging::LogFormat::parse(text) {
                Some(format) => format,
                None => bail!("--logFormat must be json or text, not {text:?}"),
            },
        };
        let log_path = match (&self.logpath, file.system_log.destination.as_deref(), file.system_log.path) {
            (Some(path), _, _) => Some(path.clone()),
            (None, Some("file"), Some(path)) => Some(path),
            // A file without a path (or syslog): stderr, so that such a mongod.conf still loads.
            _ => None,
        };
        let mut test_commands = false;
        let mut transaction_lifetime_seconds = 60;
        for parameter in &self.set_parameter {
            match parameter.split_once('=') {
                Some(("enableTestCommands", value)) => test_commands = matches!(value, "1" | "true"),
                Some(("transactionLifetimeLimitSeconds", value)) => match value.parse::<u64>() {
                    Ok(seconds) if seconds > 0 => transaction_lifetime_seconds = seconds,
                    _ => bail!("--setParameter transactionLifetimeLimitSeconds needs a positive number of seconds"),
                },
                _ => bail!(
                    "--setParameter {parameter:?}: Strata knows enableTestCommands=1 and transactionLifetimeLimitSeconds=N"
                ),
            }
        }
        let Some(dbpath) = self.dbpath.clone().or(file.storage.db_path.clone()) else {
            bail!("no data directory: pass --dbpath DIR or set storage.dbPath in --config");
        };
        Ok(Resolved {
            dbpath,
            bind: self.bind.clone().or(bind_from_file).unwrap_or_else(|| "127.0.0.1".to_owned()),
            port: self.port.or(file.net.port).unwrap_or(27017),
            cache_size_bytes,
            compression,
            max_connections: self
                .max_connections
                .or(file.net.max_incoming_connections)
                .unwrap_or(server::config::DEFAULT_MAX_CONNECTIONS),
            auth: self.auth || auth_from_file || key.is_some() || cluster_auth_mode.accepts_x509(),
            key,
            cluster_auth_mode,
            tls,
            http_port: self.http_port.or(file.net.http.and_then(|http| http.port)),
            log_format,
            log_path,
            slow_ms: self
                .slowms
                .or(file.operation_profiling.slow_op_threshold_ms)
                .unwrap_or(server::config::DEFAULT_SLOW_MS),
            repl_set: self.repl_set.clone().or(file.replication.repl_set_name),
            oplog_size_mb: self
                .oplog_size_mb
                .or(file.replication.oplog_size_mb)
                .unwrap_or(server::config::DEFAULT_OPLOG_MB),
            test_commands,
            transaction_lifetime_seconds,
        })
    }

    /// The TLS flags over `net.tls`; a mode other than disabled needs a certificate.
    fn tls(&self, file: TlsSection) -> anyhow::Result<Option<server::tls::TlsOptions>> {
        use server::tls::{TlsFiles, TlsMode, TlsOptions};
        let mode = match self.tls_mode.as_deref().or(file.mode.as_deref()) {
            None => TlsMode::Disabled,
            Some(text) => match TlsMode::parse(text) {
                Some(mode) => mode,
                None => bail!("--tlsMode must be disabled, allowTLS, preferTLS or requireTLS, not {text:?}"),
            },
        };
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        let Some(certificate_key_file) = self.tls_certificate_key_file.clone().or(file.certificate_key_file) else {
            bail!("--tlsMode {} needs --tlsCertificateKeyFile (the server's certificate and key, PEM)", mode.name());
        };
        let files = TlsFiles {
            certificate_key_file,
            ca_file: self.tls_ca_file.clone().or(file.ca_file),
            allow_connections_without_certificates: self.tls_allow_connections_without_certificates
                || file.allow_connections_without_certificates,
            cluster_file: self.tls_cluster_file.clone().or(file.cluster_file),
            cluster_ca_file: self.tls_cluster_ca_file.clone().or(file.cluster_ca_file),
        };
        Ok(Some(TlsOptions { mode, files }))
    }
}

/// `--clusterAuthMode` (or `security.clusterAuthMode`), checked against what it needs: the
/// key modes a key file, the certificate modes TLS between members and a CA to check them.
fn cluster_auth_mode(
    text: Option<&str>,
    has_key: bool,
    tls: Option<&server::tls::TlsOptions>,
) -> anyhow::Result<server::ClusterAuthMode> {
    use server::ClusterAuthMode;
    let Some(text) = text else { return Ok(ClusterAuthMode::KeyFile) };
    let Some(mode) = ClusterAuthMode::parse(text) else {
        bail!("--clusterAuthMode must be keyFile, sendKeyFile, sendX509 or x509, not {text:?}");
    };
    if mode.accepts_key() && mode != ClusterAuthMode::SendX509 && !has_key {
        bail!("--clusterAuthMode {text} needs --keyFile");
    }
    if mode.accepts_x509() {
        let Some(tls) = tls.filter(|tls| tls.between_members()) else {
            bail!("--clusterAuthMode {text} needs TLS between members: --tlsMode preferTLS or requireTLS");
        };
        if tls.files.ca_file.is_none() {
            bail!("--clusterAuthMode {text} needs --tlsCAFile (the CAs that sign the members' certificates)");
        }
    }
    Ok(mode)
}

/// `storage.compression` (Strata's names), or mongod.conf's `storage.wiredTiger.
/// collectionConfig.blockCompressor`, whose names are taken as the nearest Strata has: snappy
/// as lz4 (both fast), zlib as zstd (both small).
fn block_compressor(storage: &StorageSection) -> Option<String> {
    if let Some(own) = &storage.compression {
        return Some(own.clone());
    }
    let wired_tiger = storage.wired_tiger.as_ref()?.collection_config.as_ref()?.block_compressor.as_deref()?;
    Some(match wired_tiger {
        "snappy" => "lz4".to_owned(),
        "zlib" => "zstd".to_owned(),
        other => other.to_owned(),
    })
}

fn parse_compression(text: &str) -> anyhow::Result<storage::Compression> {
    match storage::Compression::parse(text) {
        Some(compression) => Ok(compression),
        None => bail!("--compression must be none, lz4, zstd or zstd:LEVEL (-7 to 22), not {text:?}"),
    }
}

fn gigabytes(storage: &StorageSection) -> Option<f64> {
    storage.wired_tiger.as_ref()?.engine_config.as_ref()?.cache_size_gb
}

fn load(path: &PathBuf) -> anyhow::Result<ConfigFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading config file {}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    serde_yaml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
}

/// A `--keyFile`'s key, as mongod reads it: the file's base64 characters (whitespace is
/// ignored), 6 to 1024 of them, in a file no one but its owner may read.
fn read_key_file(path: &std::path::Path) -> anyhow::Result<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let metadata = std::fs::metadata(path).with_context(|| format!("reading the key file {}", path.display()))?;
    if metadata.permissions().mode() & 0o077 != 0 {
        bail!("permissions on {} are too open (chmod 600 it)", path.display());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the key file {}", path.display()))?;
    let key: String = text.split_whitespace().collect();
    if !(6..=1024).contains(&key.len()) {
        bail!("the key file {} must hold 6 to 1024 characters, not {}", path.display(), key.len());
    }
    if let Some(bad) = key.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))) {
        bail!("the key file {} may hold only base64 characters, not {bad:?}", path.display());
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a key file is read as mongod reads one. Method: a good key (whitespace ignored),
    /// then one breach at a time: open permissions, too short, not base64.
    #[test]
    fn key_files_are_checked_as_mongod_checks_them() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("strata-key-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path
        };
        assert_eq!(read_key_file(&write("good", "c2VjcmV0\n a2V5\n", 0o600)).unwrap(), "c2VjcmV0a2V5");
        assert!(read_key_file(&write("open", "c2VjcmV0a2V5", 0o644)).unwrap_err().to_string().contains("too open"));
        assert!(read_key_file(&write("short", "abc", 0o600)).is_err());
        assert!(read_key_file(&write("bad", "secret-key!", 0o600)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Goal: `--clusterAuthMode` is refused without what it needs, and x509 implies `--auth`.
    /// Method: resolve each mode with and without a key, TLS between members and a CA.
    #[test]
    fn cluster_auth_modes_need_their_key_or_tls() {
        use server::ClusterAuthMode;
        use server::tls::{TlsFiles, TlsMode, TlsOptions};
        let tls = |mode, ca_file: Option<&str>| TlsOptions {
            mode,
            files: TlsFiles {
                certificate_key_file: "member.pem".into(),
                ca_file: ca_file.map(PathBuf::from),
                allow_connections_without_certificates: false,
                cluster_file: None,
                cluster_ca_file: None,
            },
        };
        let require = tls(TlsMode::RequireTls, Some("ca.pem"));
        assert_eq!(cluster_auth_mode(None, false, None).unwrap(), ClusterAuthMode::KeyFile);
        assert_eq!(cluster_auth_mode(Some("x509"), false, Some(&require)).unwrap(), ClusterAuthMode::X509);
        assert_eq!(cluster_auth_mode(Some("sendX509"), true, Some(&require)).unwrap(), ClusterAuthMode::SendX509);
        let refused =
            |text, key, tls: Option<&TlsOptions>| cluster_auth_mode(Some(text), key, tls).unwrap_err().to_string();
        assert!(refused("sendKeyFile", false, Some(&require)).contains("needs --keyFile"));
        assert!(refused("x509", false, None).contains("needs TLS between members"));
        assert!(refused("x509", false, Some(&tls(TlsMode::AllowTls, Some("ca.pem")))).contains("needs TLS"));
        assert!(refused("x509", false, Some(&tls(TlsMode::PreferTls, None))).contains("needs --tlsCAFile"));
        assert!(refused("X509", false, Some(&require)).contains("must be keyFile"));
        let args = ServeArgs {
            dbpath: Some("d".into()),
            cluster_auth_mode: Some("x509".into()),
            tls_mode: Some("requireTLS".into()),
            tls_certificate_key_file: Some("member.pem".into()),
            tls_ca_file: Some("ca.pem".into()),
            ..ServeArgs::default()
        };
        let resolved = args.resolve().unwrap();
        assert!(resolved.auth, "members that authenticate turn access control on, as mongod");
        assert_eq!(resolved.cluster_auth_mode, ClusterAuthMode::X509);
    }

    /// Goal: a mongod.conf loads; flags win over it. Method: write a YAML file, resolve twice.
    #[test]
    fn config_file_and_flags() {
        let dir = std::env::temp_dir().join(format!("strata-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mongod.conf");
        std::fs::write(
            &path,
            "storage:\n  dbPath: /var/lib/strata\n  journal:\n    enabled: true\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 0.25\nnet:\n  port: 27018\n  bindIp: 127.0.0.1,::1\nsystemLog:\n  destination: file\n",
        )
        .unwrap();
        let from_file = ServeArgs { config: Some(path.clone()), ..ServeArgs::default() };
        let resolved = from_file.resolve().unwrap();
        assert_eq!(resolved.dbpath, PathBuf::from("/var/lib/strata"));
        assert_eq!(resolved.port, 27018);
        assert_eq!(resolved.bind, "127.0.0.1");
        assert_eq!(resolved.cache_size_bytes, 1 << 28);
        assert_eq!(resolved.compression, None, "the defaults: documents zstd:1, indexes lz4");
        assert_eq!((resolved.log_path.as_ref(), resolved.auth, resolved.http_port), (None, false, None));
        let operating = dir.join("operating.conf");
        std::fs::write(
            &operating,
            "storage:\n  dbPath: d\n  wiredTiger:\n    collectionConfig:\n      blockCompressor: zlib\nsystemLog:\n  destination: file\n  path: /var/log/strata.log\nsecurity:\n  authorization: enabled\nnet:\n  http:\n    port: 9091\noperationProfiling:\n  slowOpThresholdMs: 250\n",
        )
        .unwrap();
        let resolved = ServeArgs { config: Some(operating), ..ServeArgs::default() }.resolve().unwrap();
        assert_eq!(resolved.log_path, Some(PathBuf::from("/var/log/strata.log")));
        assert_eq!((resolved.auth, resolved.http_port, resolved.slow_ms), (true, Some(9091), 250));
        assert_eq!(resolved.compression, Some(storage::Compression::Zstd(3)), "mongod.conf's zlib is read as zstd");
        let flags = ServeArgs {
            config: Some(path),
            port: Some(1234),
            cache_size: Some("64MiB".into()),
            dbpath: Some("data".into()),
            compression: Some("zstd:9".into()),
            ..ServeArgs::default()
        };
        let resolved = flags.resolve().unwrap();
        assert_eq!(resolved.compression, Some(storage::Compression::Zstd(9)));
        let bad = ServeArgs { dbpath: Some("d".into()), compression: Some("snappy".into()), ..ServeArgs::default() };
        assert!(bad.resolve().is_err(), "Strata's own flag takes only its own names");
        assert_eq!((resolved.port, resolved.cache_size_bytes), (1234, 64 << 20));
        assert_eq!(resolved.slow_ms, server::config::DEFAULT_SLOW_MS);
        assert_eq!(resolved.dbpath, PathBuf::from("data"));
        assert!(ServeArgs::default().resolve().is_err(), "dbpath is required");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
