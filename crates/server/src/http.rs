//! The HTTP port (`--http-port`, off by default, bound to the same address as the main port):
//! `/metrics` in Prometheus' text format, `/healthz` (200 "ok" while the server answers
//! commands and its store reads, else 503), and `/`, the dashboard — one self-contained page
//! (`dashboard.html`, no build step, no outside resources) that reads `/metrics` every second
//! and draws the insert and query rates, command latency, the cache, the flush backlog,
//! checkpoints and index sizes.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;

use crate::state::Shared;

const DASHBOARD: &str = include_str!("dashboard.html");

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .with_state(shared)
}

async fn dashboard() -> Html<&'static str> {
    Html(DASHBOARD)
}

/// Reading collection sizes reads the store: done on a blocking thread.
async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let rendered = tokio::task::spawn_blocking(move || shared.metrics.render(&shared)).await;
    match rendered {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("metrics failed: {error}\n"),
        ),
    }
}

async fn healthz(State(shared): State<Arc<Shared>>) -> (StatusCode, &'static str) {
    let answered = tokio::task::spawn_blocking(move || shared.store.list_databases().is_ok()).await;
    match answered {
        Ok(true) => (StatusCode::OK, "ok\n"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "unavailable\n"),
    }
}
