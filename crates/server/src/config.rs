//! `ServerConfig`: everything the binary decides before the server starts. The server reads it
//! and never changes it; `getCmdLineOpts` reports it back.

use bson::Document;

/// MongoDB's default connection limit is far higher; this one bounds memory: each connection
/// may buffer up to one 48 MB message.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1_000;

/// The oplog's default cap (`--oplogSizeMB`), mongod's on a small machine.
pub const DEFAULT_OPLOG_MB: u64 = 990;

/// mongod's default `slowms`.
pub const DEFAULT_SLOW_MS: u64 = 100;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on, e.g. "127.0.0.1".
    pub bind: String,
    /// Port to listen on; 0 picks a free one (see `Server::local_addr`).
    pub port: u16,
    /// Connections accepted at once; further clients wait in the accept backlog.
    pub max_connections: usize,
    /// `--auth`: clients must authenticate, and may run only what their roles grant.
    pub auth: bool,
    /// `--keyFile`'s key: the replica set's members authenticate to each other as
    /// `__system@local` with it (SCRAM-SHA-256), as mongod's members do.
    pub key: Option<String>,
    /// `--clusterAuthMode`: whether members prove themselves with the key or their
    /// certificates (which need TLS between members).
    pub cluster_auth_mode: crate::replication::member_auth::ClusterAuthMode,
    /// Commands slower than this many milliseconds are logged ("Slow query"), as `--slowms`.
    pub slow_ms: u64,
    /// The HTTP port for metrics, health and the dashboard (`--http-port`); `None`: off.
    pub http_port: Option<u16>,
    /// TLS (`--tlsMode` and its files); `None` is `disabled`.
    pub tls: Option<crate::tls::TlsOptions>,
    /// `--replSet`: run as a replica set of this name (one member).
    pub repl_set: Option<String>,
    /// `--oplogSizeMB`: the oplog's cap in replica-set mode.
    pub oplog_size_mb: u64,
    /// `--setParameter enableTestCommands=1`: test-only commands (`configureFailPoint`).
    pub test_commands: bool,
    /// `transactionLifetimeLimitSeconds`: older transactions are aborted.
    pub transaction_lifetime: std::time::Duration,
    /// The process's arguments, for `getCmdLineOpts`.
    pub argv: Vec<String>,
    /// The parsed options in mongod.conf shape (`{storage: {dbPath}, net: {port, bindIp}}`).
    pub parsed_options: Document,
    /// The memory the process may use (its cgroup's limit, or the machine's RAM); large
    /// messages are admitted only if they fit (`admission`). `None`: no check.
    pub memory_limit_bytes: Option<u64>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: "127.0.0.1".to_owned(),
            port: 27017,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            auth: false,
            key: None,
            cluster_auth_mode: Default::default(),
            tls: None,
            http_port: None,
            slow_ms: DEFAULT_SLOW_MS,
            repl_set: None,
            test_commands: false,
            transaction_lifetime: std::time::Duration::from_secs(60),
            oplog_size_mb: DEFAULT_OPLOG_MB,
            argv: Vec::new(),
            parsed_options: Document::new(),
            memory_limit_bytes: None,
        }
    }
}
