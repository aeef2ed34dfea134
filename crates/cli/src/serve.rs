//! `strata serve`: open the store, serve until SIGINT/SIGTERM, close the store (checkpoint).
//! Exits 0 after a clean close, non-zero if the store could not be opened or closed.
//!
//! Prints one line to stdout once listening — `strata listening on 127.0.0.1:27017` — so that
//! scripts and tests that pass `--port 0` learn the port. Logs go to stderr (`RUST_LOG`
//! filters them; default `info`).

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use bson::doc;
use docstore::{Store, StoreOptions};
use tracing::{info, warn};

use crate::options::{Resolved, ServeArgs};

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = args.resolve()?;
    server::logging::init(options.log_format, options.log_path.clone()).map_err(anyhow::Error::msg)?;
    raise_file_limit(options.max_connections);
    std::fs::create_dir_all(&options.dbpath)
        .with_context(|| format!("creating data directory {}", options.dbpath.display()))?;
    // Every active connection is served by a thread of the blocking pool (see the server's
    // `connection` module), so the pool must hold one per connection the server accepts.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(options.max_connections + 64)
        .thread_name("strata-io")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(options))
}

async fn serve(options: Resolved) -> anyhow::Result<()> {
    let config = server::ServerConfig {
        bind: options.bind.clone(),
        port: options.port,
        max_connections: options.max_connections,
        auth: options.auth,
        key: options.key.clone(),
        cluster_auth_mode: options.cluster_auth_mode,
        tls: options.tls.clone(),
        http_port: options.http_port,
        slow_ms: options.slow_ms,
        repl_set: options.repl_set.clone(),
        oplog_size_mb: options.oplog_size_mb,
        test_commands: options.test_commands,
        transaction_lifetime: std::time::Duration::from_secs(options.transaction_lifetime_seconds),
        argv: std::env::args().collect(),
        memory_limit_bytes: crate::memory_limit::memory_limit_bytes(),
        parsed_options: doc! {
            "storage": { "dbPath": options.dbpath.display().to_string() },
            "net": {
                "bindIp": options.bind.clone(),
                "port": i32::from(options.port),
                "tls": { "mode": options.tls.as_ref().map_or("disabled", |tls| tls.mode.name()) },
            },
            "security": {
                "authorization": if options.auth { "enabled" } else { "disabled" },
                "clusterAuthMode": options.cluster_auth_mode.name(),
            },
        },
    };
    let mut config = config;
    if let Some(name) = &options.repl_set {
        config
            .parsed_options
            .insert("replication", doc! {"replSetName": name.clone(), "oplogSizeMB": options.oplog_size_mb as i64});
    }
    if options.test_commands || options.transaction_lifetime_seconds != 60 {
        let mut parameters = bson::Document::new();
        if options.test_commands {
            parameters.insert("enableTestCommands", "1");
        }
        parameters.insert("transactionLifetimeLimitSeconds", options.transaction_lifetime_seconds.to_string());
        config.parsed_options.insert("setParameter", parameters);
    }
    let store = open_store(&options).await?;
    let server = server::Server::bind(config, Arc::clone(&store))
        .await
        .with_context(|| format!("listening on {}:{}", options.bind, options.port))?;
    let address = server.local_addr();
    info!(%address, dbpath = %options.dbpath.display(), cache_size_bytes = options.cache_size_bytes, "strata listening");
    println!("strata listening on {address}");
    if let Some(http) = server.http_addr() {
        info!(%http, "metrics on http://{http}/metrics, dashboard on http://{http}/");
        println!("strata http on {http}");
    }
    std::io::stdout().flush().context("writing to stdout")?;
    tokio::spawn(rotate_logs_on_sigusr1());
    server.run(shutdown_signal()).await;
    close_store(store).await?;
    info!("shut down cleanly");
    Ok(())
}

/// Open (and recover) the store on a blocking thread: recovery reads the log.
async fn open_store(options: &Resolved) -> anyhow::Result<Arc<Store>> {
    let mut store_options = StoreOptions::default();
    let limit = crate::memory_limit::memory_limit_bytes();
    let (cache_size_bytes, cut) = crate::memory_limit::fit_cache(options.cache_size_bytes, limit);
    if let Some(why) = cut {
        tracing::warn!(limit_bytes = limit, cache_size_bytes, "{why}");
    }
    // A sort or group may hold this much before it spills or fails (292): no more than an
    // eighth of a tight limit, so that a few at once still fit beside the cache.
    if let Some(per_operation) = limit.map(|limit| usize::try_from(limit / 8).unwrap_or(usize::MAX)) {
        store_options.sort_memory_limit_bytes = store_options.sort_memory_limit_bytes.min(per_operation);
        store_options.group_memory_limit_bytes = store_options.group_memory_limit_bytes.min(per_operation);
    }
    let cache_size_bytes = usize::try_from(cache_size_bytes).unwrap_or(usize::MAX);
    // A new data file gets nodes sized for this cache; an existing one keeps its own.
    store_options.engine = storage::Options::for_cache_size(cache_size_bytes);
    if let Some(compression) = options.compression {
        store_options.engine.compression = compression;
        store_options.document_compression = Some(compression);
    }
    let dbpath = options.dbpath.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(&dbpath, store_options).map_err(anyhow::Error::from))
        .await
        .context("opening the store")?
        .with_context(|| format!("opening the store in {}", options.dbpath.display()))?;
    let stats = store.engine_stats();
    let recovery = stats.recovery;
    info!(
        replayed_records = recovery.replayed_records,
        replayed_bytes = recovery.replayed_bytes,
        log_disk_bytes = stats.log_disk_bytes,
        data_file_bytes = stats.data_file_bytes,
        recovery_ms = recovery.micros / 1000,
        "store opened: replayed {} log records ({} bytes) in {} ms{}",
        recovery.replayed_records,
        recovery.replayed_bytes,
        recovery.micros / 1000,
        if recovery.replayed_records > 0 { "; checkpointing them in the background" } else { "" },
    );
    if !store.upgraded_collections().is_empty() {
        let collections = store.upgraded_collections().join(", ");
        info!(%collections, "rebuilt the collections written in an older index key format (numbers in keys are now binary)");
    }
    if let Some(damage) = &recovery.catalog_damage {
        warn!(%damage, "the checkpoint's catalog block is damaged: it was read from its copy (the next checkpoint writes both again); run validate on every collection");
    }
    Ok(Arc::new(store))
}

/// Checkpoint and close. Handlers still running past the shutdown grace period keep the store
/// alive: wait for them a little, then give up with an error (the log still has every write).
async fn close_store(mut store: Arc<Store>) -> anyhow::Result<()> {
    for _ in 0..100 {
        match Arc::try_unwrap(store) {
            Ok(owned) => {
                let closed = tokio::task::spawn_blocking(move || owned.close()).await.context("closing the store")?;
                return match closed {
                    // Nothing is lost: the log holds every commit (see `storage::Engine::close`).
                    Err(docstore::Error::OutOfDiskSpace(reason)) => {
                        tracing::warn!(%reason, "shut down without a final checkpoint: the disk is full");
                        Ok(())
                    }
                    other => other.context("checkpointing the store"),
                };
            }
            Err(shared) => {
                store = shared;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    anyhow::bail!("the store is still in use after shutdown; not checkpointed (recovery will replay the log)")
}

/// Completes on the first SIGINT or SIGTERM.
/// SIGUSR1 rotates the log file, as it does for mongod.
async fn rotate_logs_on_sigusr1() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut signals) = signal(SignalKind::user_defined1()) else { return };
    while signals.recv().await.is_some() {
        match server::logging::rotate() {
            Ok(Some(rotated)) => info!(rotated = %rotated.display(), "log rotated (SIGUSR1)"),
            Ok(None) => info!("SIGUSR1: logging to stderr, nothing to rotate"),
            Err(error) => tracing::warn!(%error, "cannot rotate the log"),
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT received"),
        () = terminate => info!("SIGTERM received"),
    }
}

/// Each connection is a socket: raise the soft limit on open files to the hard one (as mongod
/// asks of its service file), and warn when even that cannot hold `max_connections`.
fn raise_file_limit(max_connections: usize) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(%error, "cannot raise the open-file limit");
        }
    }
    let current = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    // The data file, the log, the listener and the runtime need a few dozen more.
    if current < max_connections as u64 + 64 {
        tracing::warn!(
            open_file_limit = current,
            max_connections,
            "the open-file limit is below the connection limit: connections past it will be refused"
        );
    }
}
