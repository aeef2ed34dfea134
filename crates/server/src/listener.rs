//! `Server`: the accept loop. It binds, accepts up to `max_connections` clients at once (one
//! tokio task each; a client over the limit is accepted and closed at once, with a log line,
//! as mongod does), and on shutdown stops accepting, tells every connection to finish the
//! request it is running, waits for them (bounded), and returns.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tracing::{info, warn};

use docstore::Store;

use crate::config::ServerConfig;
use crate::connection;
use crate::metrics::Metrics;
use crate::state::{ConnectionInfo, Counters, Shared};
use crate::tls::{Tls, TlsMode};

/// How long shutdown waits for in-flight requests before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

pub struct Server {
    listener: TcpListener,
    /// The HTTP port's listener (metrics, health, dashboard), when configured.
    http: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Server {
    /// Bind the listening socket (port 0 picks a free port).
    pub async fn bind(config: ServerConfig, store: Arc<Store>) -> std::io::Result<Server> {
        let tls = match config.tls.clone() {
            Some(options) if options.mode != TlsMode::Disabled => {
                Some(Tls::load(options).map_err(std::io::Error::other)?)
            }
            _ => None,
        };
        let listener = TcpListener::bind((config.bind.as_str(), config.port)).await?;
        let http = match config.http_port {
            Some(port) => Some(TcpListener::bind((config.bind.as_str(), port)).await?),
            None => None,
        };
        let local_addr = listener.local_addr()?;
        let metrics = Metrics::new().map_err(std::io::Error::other)?;
        let shared = Shared::new(config, local_addr, store, tls, metrics).map_err(std::io::Error::other)?;
        Ok(Server { listener, http, shared })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Where the HTTP port listens, if it is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().and_then(|listener| listener.local_addr().ok())
    }

    /// Accept clients until `shutdown` completes, then drain the connections and drop every
    /// parked cursor, so that the caller holds the last reference to the store and can close it.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { listener, http, shared } = self;
        let slots = Arc::new(Semaphore::new(shared.config.max_connections));
        let (stop, stopping) = watch::channel(false);
        let http = http.map(|listener| {
            let mut stopped = stopping.clone();
            let app = crate::http::router(shared.clone());
            tokio::spawn(async move {
                let stop = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                if let Err(error) = axum::serve(listener, app).with_graceful_shutdown(stop).await {
                    warn!(%error, "the HTTP port failed");
                }
            })
        });
        let aborter = tokio::spawn(crate::transactions::abort_off_primary(shared.clone(), stopping.clone()));
        let mut connections = JoinSet::new();
        let mut next_id: i64 = 1;
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(error) => {
                        warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            while connections.try_join_next().is_some() {}
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                warn!(%peer, limit = shared.config.max_connections, "connection refused: too many open connections");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let info = ConnectionInfo { id: next_id, peer };
            next_id += 1;
            Counters::add(&shared.counters.connections_total, 1);
            Counters::add(&shared.counters.connections_current, 1);
            info!(connection = info.id, %peer, "connection accepted");
            let (shared, stopping) = (shared.clone(), stopping.clone());
            connections.spawn(async move {
                connection::serve(stream, shared.clone(), info.clone(), stopping).await;
                shared.counters.connections_current.fetch_sub(1, Relaxed);
                info!(connection = info.id, "connection ended");
                drop(permit);
            });
        }
        drop(listener);
        info!(open = connections.len(), "shutting down: no longer accepting connections");
        let _ = stop.send(true);
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while connections.join_next().await.is_some() {} });
        if drained.await.is_err() {
            warn!("connections still busy after the shutdown grace period; abandoning them");
        }
        if let Some(http) = http {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, http).await;
        }
        let _ = aborter.await;
        shared.cursors.clear();
        if let Some(set) = &shared.replication {
            set.stop();
        }
    }
}
