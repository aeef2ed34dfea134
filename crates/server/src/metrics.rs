//! Prometheus metrics, with the `prometheus` crate: what the server counts as it runs
//! (commands by name and outcome, their latency, bytes in and out, documents inserted per
//! collection) lives in one registry; what the store and the server's state say at the moment
//! of a scrape (connections, cursors, the engine's cache, flushes and their backlog,
//! checkpoints, log syncs, bytes written per tree level, collection and index sizes) is read
//! then, into a registry made for that scrape. `render` gives the text exposition format.
//!
//! Recording a command costs a hash lookup of its name and a histogram observation: the
//! handles of every command in the table are made once, at startup.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry, TextEncoder};

use crate::commands::COMMANDS;
use crate::state::Shared;

/// Latency buckets: 25 µs to about 13 s, doubling.
const LATENCY_BUCKETS: usize = 20;
const FIRST_BUCKET_SECONDS: f64 = 25e-6;

struct CommandMetrics {
    ok: IntCounter,
    error: IntCounter,
    latency: Histogram,
}

pub struct Metrics {
    registry: Registry,
    commands: HashMap<&'static str, CommandMetrics>,
    unknown: IntCounter,
    bytes_in: IntCounter,
    bytes_out: IntCounter,
    inserted: IntCounterVec,
}

fn counter(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let counter = IntCounter::new(name, help)?;
    registry.register(Box::new(counter.clone()))?;
    Ok(counter)
}

fn register(registry: &Registry, collector: impl Collector + 'static) {
    if let Err(error) = registry.register(Box::new(collector)) {
        tracing::error!(%error, "a metric could not be registered");
    }
}

impl Metrics {
    /// The server's metrics. Their names, help texts and label sets are constants of this file
    /// (a test builds them), so an error here is a bug in this file, reported when the server
    /// starts.
    pub fn new() -> prometheus::Result<Metrics> {
        let registry = Registry::new();
        let outcomes = IntCounterVec::new(
            Opts::new("strata_commands_total", "Commands run, by command and outcome (ok or error)."),
            &["command", "outcome"],
        )?;
        let buckets = prometheus::exponential_buckets(FIRST_BUCKET_SECONDS, 2.0, LATENCY_BUCKETS)?;
        let latency = prometheus::HistogramVec::new(
            HistogramOpts::new("strata_command_duration_seconds", "Time to run a command, by command.")
                .buckets(buckets),
            &["command"],
        )?;
        let inserted = IntCounterVec::new(
            Opts::new("strata_inserted_documents_total", "Documents inserted, by database and collection."),
            &["db", "collection"],
        )?;
        let mut commands = HashMap::new();
        for spec in COMMANDS {
            let name = spec.names.first().copied().unwrap_or("unknown");
            let metrics = CommandMetrics {
                ok: outcomes.with_label_values(&[name, "ok"]),
                error: outcomes.with_label_values(&[name, "error"]),
                latency: latency.with_label_values(&[name]),
            };
            commands.insert(name, metrics);
        }
        registry.register(Box::new(outcomes))?;
        registry.register(Box::new(latency))?;
        registry.register(Box::new(inserted.clone()))?;
        Ok(Metrics {
            unknown: counter(
                &registry,
                "strata_unknown_commands_total",
                "Commands with a name the server does not know.",
            )?,
            bytes_in: counter(&registry, "strata_network_bytes_in_total", "Bytes received from clients.")?,
            bytes_out: counter(&registry, "strata_network_bytes_out_total", "Bytes sent to clients.")?,
            registry,
            commands,
            inserted,
        })
    }

    /// One command ran (`name` is its canonical name).
    pub fn command(&self, name: &str, ok: bool, elapsed: Duration) {
        match self.commands.get(name) {
            Some(metrics) => {
                if ok { &metrics.ok } else { &metrics.error }.inc();
                metrics.latency.observe(elapsed.as_secs_f64());
            }
            None => self.unknown.inc(),
        }
    }

    pub fn bytes_in(&self, bytes: usize) {
        self.bytes_in.inc_by(bytes as u64);
    }

    pub fn bytes_out(&self, bytes: usize) {
        self.bytes_out.inc_by(bytes as u64);
    }

    pub fn inserted(&self, db: &str, collection: &str, documents: usize) {
        if documents > 0 {
            self.inserted.with_label_values(&[db, collection]).inc_by(documents as u64);
        }
    }

    /// Every metric in Prometheus' text format: the running counters and a fresh reading of
    /// the server and the store. Reads the store (collection sizes): call off the async threads.
    pub fn render(&self, shared: &Shared) -> String {
        let mut families = self.registry.gather();
        families.extend(moment(shared).gather());
        TextEncoder::new().encode_to_string(&families).unwrap_or_else(|error| format!("# encoding failed: {error}\n"))
    }
}

/// A replica set member's state: its role and term, elections it won, and (on the primary) how
/// far each member and the majority commit point trail the newest write, in seconds of `ts`.
fn replication(registry: &Registry, set: &crate::replication::Replication) {
    let published = set.progress.get();
    let gauge = |name: &str, help: &str, value: f64| {
        if let Ok(gauge) = prometheus::Gauge::new(name, help) {
            gauge.set(value);
            register(registry, gauge);
        }
    };
    gauge(
        "strata_repl_state",
        "This member's state (1 primary, 2 secondary, 3 recovering, 0 startup).",
        f64::from(published.state.number()),
    );
    gauge("strata_repl_term", "The consensus term (electionId).", published.term as f64);
    gauge(
        "strata_repl_elections_won_total",
        "Elections this member won since it started.",
        published.elections_won as f64,
    );
    let seconds = |ts: u64| (ts >> 32) as f64 + (ts & 0xffff_ffff) as f64 * 1e-9;
    let newest = published.applied_ts;
    gauge(
        "strata_repl_commit_point_lag_seconds",
        "How far the majority commit point trails this member's newest entry.",
        (seconds(newest) - seconds(published.majority_ts)).max(0.0),
    );
    if published.writable {
        let Ok(lag) = prometheus::GaugeVec::new(
            prometheus::Opts::new(
                "strata_repl_member_lag_seconds",
                "How far each member trails the primary's newest entry.",
            ),
            &["member"],
        ) else {
            return;
        };
        for member in &published.members {
            lag.with_label_values(&[&(member.raft_id - 1).to_string()])
                .set((seconds(newest) - seconds(member.matched_ts)).max(0.0));
        }
        register(registry, lag);
    }
}

/// A registry of gauges holding what the server and the store say now.
fn moment(shared: &Shared) -> Registry {
    let registry = Registry::new();
    let gauge = |name: &str, help: &str, value: f64| {
        if let Ok(gauge) = prometheus::Gauge::new(name, help) {
            gauge.set(value);
            register(&registry, gauge);
        }
    };
    let counters = &shared.counters;
    gauge("strata_connections", "Open client connections.", counters.connections_current.load(Relaxed) as f64);
    gauge(
        "strata_connections_created_total",
        "Client connections accepted since start.",
        counters.connections_total.load(Relaxed) as f64,
    );
    gauge("strata_cursors_open", "Server-side cursors parked between getMores.", shared.cursors.len() as f64);
    gauge("strata_uptime_seconds", "Seconds since the server started.", shared.started.elapsed().as_secs_f64());
    if let Some(set) = &shared.replication {
        replication(&registry, set);
    }
    let stats = shared.store.engine_stats();
    let engine: [(&str, &str, f64); 20] = [
        ("strata_cache_budget_bytes", "The engine's memory budget.", stats.cache_budget_bytes as f64),
        ("strata_cache_used_bytes", "Bytes the engine's cache holds.", stats.cache_used_bytes as f64),
        ("strata_cache_evictions_total", "Nodes dropped from memory.", stats.evictions as f64),
        ("strata_cache_loads_total", "Whole nodes read back from disk.", stats.cache_loads as f64),
        ("strata_cache_write_backs_total", "Dirty nodes written to make room.", stats.write_backs as f64),
        ("strata_node_bytes_read_total", "Node bytes read from disk.", stats.node_bytes_read as f64),
        ("strata_commits_total", "Engine transactions committed.", stats.commits as f64),
        ("strata_flushes_total", "Buffer flushes down the tree.", stats.flushes as f64),
        ("strata_checkpoints_total", "Checkpoints completed.", stats.checkpoints as f64),
        ("strata_checkpoint_failures_total", "Checkpoints that failed.", stats.checkpoint_failures as f64),
        ("strata_log_write_failures_total", "Log writes that failed (a full disk).", stats.log_write_failures as f64),
        (
            "strata_node_write_failures_total",
            "Node writes that failed (a full disk).",
            stats.node_write_failures as f64,
        ),
        (
            "strata_writes_refused",
            "1 while writes are refused because the disk is full, else 0.",
            f64::from(u8::from(stats.writes_refused.is_some())),
        ),
        ("strata_checkpoint_bytes_total", "Bytes written by checkpoints.", stats.checkpoint_bytes as f64),
        ("strata_checkpoint_seconds_total", "Time spent in checkpoints.", stats.checkpoint_micros as f64 / 1e6),
        ("strata_log_syncs_total", "Log syncs (fsync of the redo log).", stats.log_syncs as f64),
        ("strata_log_bytes_total", "Bytes appended to the redo log.", stats.log_bytes as f64),
        ("strata_log_disk_bytes", "Bytes the redo log occupies on disk.", stats.log_disk_bytes as f64),
        ("strata_data_file_bytes", "Size of the data file.", stats.data_file_bytes as f64),
        ("strata_node_bytes_written_total", "Node bytes written to the data file.", stats.node_bytes_written as f64),
    ];
    for (name, help, value) in engine {
        gauge(name, help, value);
    }
    let per_sync = if stats.log_syncs == 0 { 0.0 } else { stats.commits as f64 / stats.log_syncs as f64 };
    gauge("strata_commits_per_log_sync", "Commits made durable per log sync (group commit), since start.", per_sync);
    if let Some(millis) = stats.last_checkpoint_unix_millis {
        gauge(
            "strata_last_checkpoint_timestamp_seconds",
            "When the last checkpoint finished (Unix time).",
            millis as f64 / 1e3,
        );
    }
    by_level(
        &registry,
        "strata_flush_backlog_bytes",
        "Bytes of messages buffered in internal nodes, by tree height.",
        &stats.buffered_bytes_by_height,
    );
    by_level(
        &registry,
        "strata_flushed_bytes_total",
        "Message bytes flushed down, by the height they left.",
        &stats.flushed_bytes_by_height,
    );
    by_level(
        &registry,
        "strata_node_bytes_written_by_height_total",
        "Node bytes written, by tree height.",
        &stats.node_bytes_written_by_height,
    );
    collection_sizes(&registry, shared);
    registry
}

fn by_level(registry: &Registry, name: &str, help: &str, values: &[u64]) {
    let Ok(family) = prometheus::GaugeVec::new(Opts::new(name, help), &["height"]) else { return };
    for (height, value) in values.iter().enumerate() {
        family.with_label_values(&[height.to_string().as_str()]).set(*value as f64);
    }
    register(registry, family);
}

/// Documents and bytes of every collection and index, as collStats counts them.
fn collection_sizes(registry: &Registry, shared: &Shared) {
    let (Ok(documents), Ok(bytes), Ok(index_bytes)) = (
        prometheus::GaugeVec::new(
            Opts::new("strata_collection_documents", "Documents in a collection."),
            &["db", "collection"],
        ),
        prometheus::GaugeVec::new(
            Opts::new("strata_collection_bytes", "Bytes of a collection's documents."),
            &["db", "collection"],
        ),
        prometheus::GaugeVec::new(
            Opts::new("strata_index_bytes", "Bytes of an index's entries."),
            &["db", "collection", "index"],
        ),
    ) else {
        return;
    };
    let store = &shared.store;
    for database in store.list_databases().unwrap_or_default() {
        for collection in store.list_collections(&database.name) {
            let Ok(stats) = store.collection((&database.name, &collection.name)).stats(1) else { continue };
            let labels = [database.name.as_str(), collection.name.as_str()];
            let number = |key: &str| stats.get(key).and_then(crate::command::as_i64).unwrap_or(0) as f64;
            documents.with_label_values(&labels).set(number("count"));
            bytes.with_label_values(&labels).set(number("size"));
            if let Ok(sizes) = stats.get_document("indexSizes") {
                for (index, size) in sizes {
                    let size = crate::command::as_i64(size).unwrap_or(0) as f64;
                    index_bytes.with_label_values(&[labels[0], labels[1], index.as_str()]).set(size);
                }
            }
        }
    }
    register(registry, documents);
    register(registry, bytes);
    register(registry, index_bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_valid_and_commands_are_counted() {
        let metrics = Metrics::new().unwrap();
        metrics.command("find", true, Duration::from_micros(80));
        metrics.command("find", false, Duration::from_micros(80));
        metrics.command("noSuchCommand", true, Duration::ZERO);
        metrics.inserted("db", "c", 3);
        let text = TextEncoder::new().encode_to_string(&metrics.registry.gather()).unwrap();
        assert!(text.contains("strata_commands_total{command=\"find\",outcome=\"ok\"} 1"), "{text}");
        assert!(text.contains("strata_commands_total{command=\"find\",outcome=\"error\"} 1"));
        assert!(text.contains("strata_unknown_commands_total 1"));
        assert!(text.contains("strata_inserted_documents_total{collection=\"c\",db=\"db\"} 3"));
        assert!(text.contains("strata_command_duration_seconds_bucket{command=\"find\",le=\"0.0001\"} 2"));
    }
}
