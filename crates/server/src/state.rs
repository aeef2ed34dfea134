//! `Shared`: what every connection of one server sees — its configuration, the store, the
//! open cursors, counters for `serverStatus`, and the id sequence for replies. Counters are
//! atomics; the cursor table has its own lock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use docstore::Store;

use crate::auth::{self, Authentication, Security};
use crate::config::ServerConfig;
use crate::cursors::Cursors;
use crate::error::CommandError;
use crate::metrics::Metrics;
use crate::replication::Replication;
use crate::replication::member_auth::MemberCredentials;
use crate::tls::Tls;

pub struct Shared {
    pub config: ServerConfig,
    pub local_addr: SocketAddr,
    pub started: Instant,
    pub counters: Counters,
    pub store: Arc<Store>,
    pub cursors: Cursors,
    pub security: Security,
    /// Prometheus metrics (served on the HTTP port).
    pub metrics: Metrics,
    /// TLS, when the server speaks it.
    pub tls: Option<Tls>,
    /// What `getLog: "startupWarnings"` returns, as mongod's log lines (also logged at startup).
    pub startup_warnings: Vec<String>,
    /// Test fail points (`configureFailPoint`, with `enableTestCommands`).
    pub fail_points: crate::fail_points::FailPoints,
    /// Snapshot reads' views, for reads at their `atClusterTime`.
    pub held_snapshots: crate::read_concern::HeldSnapshots,
    /// Logical sessions (`lsid`s seen, their retryable-write checkouts).
    pub sessions: crate::sessions::Sessions,
    /// Replica-set mode (`--replSet`), or `None` for a standalone server.
    pub replication: Option<Replication>,
    /// This process's id in a standalone's `topologyVersion`.
    pub process_id: bson::oid::ObjectId,
    /// The commands running now (`currentOp`, `killOp`, `maxTimeMS`).
    pub operations: crate::operations::Operations,
    /// Profiling levels per database, and the slow-operation threshold.
    pub profiler: crate::profiler::Profiler,
    /// Time per collection by kind of command (`top`, `latencyStats`).
    pub top: crate::top::Top,
    /// Generation counters bumped by the changes a parked command may wait for: an oplog
    /// entry, a topology change (see `Context::park`).
    oplog_wakeups: Arc<tokio::sync::watch::Sender<u64>>,
    topology_wakeups: Arc<tokio::sync::watch::Sender<u64>>,
    next_request_id: AtomicI32,
}

/// Monotonic counters, as `serverStatus.opcounters` and `connections` report them.
#[derive(Default)]
pub struct Counters {
    pub connections_current: AtomicU64,
    pub connections_total: AtomicU64,
    /// Connections served by a thread now (in a burst: see `connection`); `connections.active`.
    pub connections_active: AtomicU64,
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Relaxed);
    }
}

impl Shared {
    pub fn new(
        config: ServerConfig,
        local_addr: SocketAddr,
        store: Arc<Store>,
        tls: Option<Tls>,
        metrics: Metrics,
    ) -> Result<Arc<Shared>, CommandError> {
        let mode = config.cluster_auth_mode;
        let member_attributes = match &config.tls {
            Some(tls) if mode.accepts_x509() => Some(member_attributes(tls)?),
            _ => None,
        };
        let security = Security::new(config.auth || config.key.is_some() || mode.accepts_x509(), member_attributes);
        if config.key.is_some() || mode.accepts_x509() {
            let key = config.key.as_deref().filter(|_| mode.accepts_key());
            auth::set_internal_user(key).map_err(CommandError::bad_value)?;
        }
        let topology_wakeups = Arc::new(tokio::sync::watch::Sender::new(0));
        let replication = match &config.repl_set {
            Some(name) => {
                let me = member_address(&config.bind, local_addr);
                let wake = Arc::clone(&topology_wakeups);
                let data_dir = config
                    .parsed_options
                    .get_document("storage")
                    .ok()
                    .and_then(|storage| storage.get_str("dbPath").ok())
                    .map(std::path::PathBuf::from);
                let credentials = member_credentials(&config)?;
                let replication =
                    Replication::open(name, config.oplog_size_mb, me, &store, wake, (data_dir, credentials))?;
                Some(replication)
            }
            None => None,
        };
        let startup_warnings = auth::startup_warnings(config.auth, local_addr)
            .iter()
            .map(|warning| crate::logging::json_line("W", "CONTROL", "initandlisten", warning))
            .collect();
        let shared = Arc::new(Shared {
            replication,
            operations: crate::operations::Operations::default(),
            process_id: bson::oid::ObjectId::new(),
            profiler: crate::profiler::Profiler::new(config.slow_ms),
            top: crate::top::Top::default(),
            fail_points: crate::fail_points::FailPoints::default(),
            held_snapshots: crate::read_concern::HeldSnapshots::default(),
            sessions: crate::sessions::Sessions::new(Duration::from_secs(
                60 * crate::commands::hello::LOGICAL_SESSION_TIMEOUT_MINUTES as u64,
            )),
            oplog_wakeups: Arc::new(tokio::sync::watch::Sender::new(0)),
            topology_wakeups,
            config,
            security,
            startup_warnings,
            metrics,
            tls,
            local_addr,
            started: Instant::now(),
            counters: Counters::default(),
            store,
            cursors: Cursors::default(),
            next_request_id: AtomicI32::new(1),
        });
        shared.wake_on_oplog();
        if let Some(set) = &shared.replication {
            // Change streams on a primary wait for the majority commit point, not the append.
            let wakeups = Arc::clone(&shared.oplog_wakeups);
            set.progress.on_majority_moved(Box::new(move || wakeups.send_modify(|generation| *generation += 1)));
        }
        let wakeups = Arc::clone(&shared.oplog_wakeups);
        // Tailable cursors on capped collections wait as the oplog's do.
        shared.store.on_capped_insert(Box::new(move || wakeups.send_modify(|generation| *generation += 1)));
        Ok(shared)
    }

    /// Parked commands wake when the oplog grows (a store without one yet gets it at
    /// `replSetInitiate`, which calls this again).
    pub fn wake_on_oplog(&self) {
        if let Some(oplog) = self.store.oplog() {
            let wakeups = Arc::clone(&self.oplog_wakeups);
            oplog.on_append(Box::new(move || wakeups.send_modify(|generation| *generation += 1)));
        }
    }

    /// Wakes the commands parked on `on` (they re-check what they wait for).
    pub fn wake(&self, on: WakeOn) {
        self.wakeups(on).send_modify(|generation| *generation += 1);
    }

    /// The current generation of `on`: read it before checking what to wait for.
    pub fn wakeup_generation(&self, on: WakeOn) -> u64 {
        *self.wakeups(on).borrow()
    }

    pub fn wakeups(&self, on: WakeOn) -> &tokio::sync::watch::Sender<u64> {
        match on {
            WakeOn::Oplog => &self.oplog_wakeups,
            WakeOn::Topology => &self.topology_wakeups,
        }
    }

    /// The `requestID` of the next reply this server sends (wraps, as int32 ids do).
    pub fn next_request_id(&self) -> i32 {
        self.next_request_id.fetch_add(1, Relaxed)
    }
}

/// This member's `host:port` as the replica set names it: the bound address, or the machine's
/// name when bound to every interface.
fn member_address(bind: &str, local: SocketAddr) -> String {
    let host = match bind {
        "0.0.0.0" | "::" => std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into()),
        _ => local.ip().to_string(),
    };
    format!("{host}:{}", local.port())
}

/// One client connection, as its handlers see it.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub id: i64,
    pub peer: SocketAddr,
}

/// What a handler gets: the shared state, its connection, and who the connection is.
pub struct Context {
    pub shared: Arc<Shared>,
    pub connection: ConnectionInfo,
    /// The connection's authentication; only this connection's thread touches it.
    pub auth: std::sync::Mutex<Authentication>,
    /// A command that waits (see [`Context::park`]).
    wait: std::sync::Mutex<Wait>,
    /// The application name the client gave in its handshake (`client.application.name`).
    pub app_name: std::sync::Mutex<Option<String>>,
    /// The session and transaction a transactional command runs in (`transactions::enter`).
    pub transaction: std::sync::Mutex<Option<crate::transactions::Active>>,
    /// Set by a command after which the connection must close without a reply (a fail point).
    close: std::sync::atomic::AtomicBool,
}

/// The wait of a parked command: its deadline while it is run again, and a park it asks for.
#[derive(Default)]
struct Wait {
    deadline: Option<Instant>,
    park: Option<Park>,
}

/// What a parked command waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeOn {
    /// New oplog entries (change streams, tailable cursors).
    Oplog,
    /// A change of `hello`'s topology (awaitable `hello`).
    Topology,
}

/// A command parked until the generation of `on` passes `seen` or `deadline` comes.
#[derive(Debug, Clone, Copy)]
pub struct Park {
    pub on: WakeOn,
    pub seen: u64,
    pub deadline: Instant,
}

impl Context {
    pub fn new(shared: Arc<Shared>, connection: ConnectionInfo) -> Context {
        Context {
            shared,
            connection,
            auth: auth::new_state(),
            wait: std::sync::Mutex::new(Wait::default()),
            app_name: std::sync::Mutex::new(None),
            transaction: std::sync::Mutex::new(None),
            close: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Closes the connection after this command, without a reply.
    pub fn close_after(&self) {
        self.close.store(true, Relaxed);
    }

    /// Whether the last command asked to close the connection (the connection's business).
    pub fn take_close(&self) -> bool {
        self.close.swap(false, Relaxed)
    }

    pub fn app_name(&self) -> Option<String> {
        self.app_name.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The deadline of a command that may wait up to `max`: set when it first runs, kept while
    /// it is run again after wakeups.
    pub fn wait_deadline(&self, max: Duration) -> Instant {
        let mut wait = self.wait.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *wait.deadline.get_or_insert_with(|| Instant::now() + max)
    }

    /// Parks the command that is running: its reply is dropped, and the connection runs it
    /// again once the generation of `on` passes `seen` or at `deadline`, without holding a
    /// thread meanwhile. The handler must return right after.
    pub fn park(&self, on: WakeOn, seen: u64, deadline: Instant) {
        let mut wait = self.wait.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        wait.park = Some(Park { on, seen, deadline });
    }

    /// The park the last command asked for (the connection's business).
    pub fn take_park(&self) -> Option<Park> {
        let mut wait = self.wait.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let park = wait.park.take();
        if park.is_none() {
            wait.deadline = None;
        }
        park
    }
}

/// The attributes of this member's own certificate that a member's certificate must share
/// (X.509 membership); a certificate without any cannot tell members from clients.
fn member_attributes(tls: &crate::tls::TlsOptions) -> Result<Vec<(String, String)>, CommandError> {
    let attributes = tls.own_member_attributes().map_err(CommandError::bad_value)?;
    if attributes.is_empty() {
        return Err(CommandError::bad_value(format!(
            "X.509 membership needs an organization (O), unit (OU) or domain component (DC) in the subject of {}",
            tls.member_certificate_file().display()
        )));
    }
    Ok(attributes)
}

/// What this member connects to the others with: TLS when the members speak it (`preferTLS`,
/// `requireTLS`), and the key or its certificate as `--clusterAuthMode` says.
fn member_credentials(config: &ServerConfig) -> Result<MemberCredentials, CommandError> {
    let tls = match config.tls.as_ref().filter(|tls| tls.between_members()) {
        Some(tls) => Some(Arc::new(tls.member_client_config().map_err(CommandError::bad_value)?)),
        None => None,
    };
    let x509 = config.cluster_auth_mode.sends_x509();
    if x509 && tls.is_none() {
        return Err(CommandError::bad_value(format!(
            "--clusterAuthMode {} needs TLS between members: --tlsMode preferTLS or requireTLS",
            config.cluster_auth_mode.name()
        )));
    }
    Ok(MemberCredentials { key: config.key.as_deref().map(Arc::from), x509, tls })
}
