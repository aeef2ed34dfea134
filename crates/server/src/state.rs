//! `Shared`: what every connection of one server sees — its configuration, the store, the
//! open cursors, counters for `serverStatus`, and the id sequence for replies. Counters are
//! atomics; the cursor table has its own lock.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use docstore::Store;

use crate::auth::{self, Authentication, Security};
use crate::config::ServerConfig;
use crate::cursors::Cursors;
use crate::metrics::Metrics;
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
    next_request_id: AtomicI32,
}

/// Monotonic counters, as `serverStatus.opcounters` and `connections` report them.
#[derive(Default)]
pub struct Counters {
    pub connections_current: AtomicU64,
    pub connections_total: AtomicU64,
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
    ) -> Arc<Shared> {
        let security = Security::new(config.auth);
        let startup_warnings = auth::startup_warnings(config.auth, local_addr)
            .iter()
            .map(|warning| crate::logging::json_line("W", "CONTROL", "initandlisten", warning))
            .collect();
        Arc::new(Shared {
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
        })
    }

    /// The `requestID` of the next reply this server sends (wraps, as int32 ids do).
    pub fn next_request_id(&self) -> i32 {
        self.next_request_id.fetch_add(1, Relaxed)
    }
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
}

impl Context {
    pub fn new(shared: Arc<Shared>, connection: ConnectionInfo) -> Context {
        Context { shared, connection, auth: auth::new_state() }
    }
}
