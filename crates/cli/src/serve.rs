//! `strata serve`: open the store, serve until SIGINT/SIGTERM, close the store (checkpoint).
//!
//! Prints one line to stdout once listening — `strata listening on 127.0.0.1:27017` — so that
//! scripts and tests that pass `--port 0` learn the port. Logs go to stderr (`RUST_LOG`
//! filters them; default `info`).

use std::io::Write as _;

use anyhow::Context as _;
use bson::doc;
use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::options::{Resolved, ServeArgs};

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let options = args.resolve()?;
    std::fs::create_dir_all(&options.dbpath)
        .with_context(|| format!("creating data directory {}", options.dbpath.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
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
        argv: std::env::args().collect(),
        parsed_options: doc! {
            "storage": { "dbPath": options.dbpath.display().to_string() },
            "net": { "bindIp": options.bind.clone(), "port": i32::from(options.port) },
        },
    };
    let server = server::Server::bind(config)
        .await
        .with_context(|| format!("listening on {}:{}", options.bind, options.port))?;
    let address = server.local_addr();
    info!(%address, dbpath = %options.dbpath.display(), cache_size_bytes = options.cache_size_bytes, "strata listening");
    println!("strata listening on {address}");
    std::io::stdout().flush().context("writing to stdout")?;
    server.run(shutdown_signal()).await;
    info!("shut down cleanly");
    Ok(())
}

/// Completes on the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
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

fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();
}
