//! `serverStatus`: process, connection and operation counters, and — under `strata` — the
//! storage engine's own statistics (flushes, cascades, checkpoints, cache, log syncs), so a
//! user can watch the engine work.

use std::sync::atomic::Ordering::Relaxed;

use bson::{Bson, DateTime, Document, RawDocumentBuf, doc};

use crate::auth;
use crate::command::Command;
use crate::commands::{build_info::VERSION, reply};
use crate::error::CommandError;
use crate::state::Context;

pub fn run(context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let shared = &context.shared;
    let counters = &shared.counters;
    let uptime = shared.started.elapsed();
    let current = counters.connections_current.load(Relaxed) as i64;
    let max = shared.config.max_connections as i64;
    let mut fields = doc! {
        "host": shared.local_addr.to_string(),
        "version": VERSION,
        "process": "strata",
        "pid": i64::from(std::process::id()),
        "uptime": uptime.as_secs_f64(),
        "uptimeMillis": uptime.as_millis() as i64,
        "uptimeEstimate": uptime.as_secs() as i64,
        "localTime": DateTime::now(),
        "connections": {
            "current": current,
            "available": (max - current).max(0),
            "totalCreated": counters.connections_total.load(Relaxed) as i64,
            "active": counters.connections_active.load(Relaxed) as i64,
        },
        "opcounters": {
            "insert": counters.insert.load(Relaxed) as i64,
            "query": counters.query.load(Relaxed) as i64,
            "update": counters.update.load(Relaxed) as i64,
            "delete": counters.delete.load(Relaxed) as i64,
            "getmore": counters.getmore.load(Relaxed) as i64,
            "command": counters.command.load(Relaxed) as i64,
        },
        "storageEngine": { "name": "strata", "supportsCommittedReads": true, "persistent": true },
        "security": { "authentication": auth::authentication_counters(&shared.security) },
    };
    if let Some(stats) = engine_stats(context) {
        fields.insert("strata", stats);
    }
    if let Some(set) = &shared.replication {
        fields.insert("repl", set.server_status_fields());
    }
    reply(fields)
}

/// The engine's counters as a document, if the server has a store.
fn engine_stats(context: &Context) -> Option<Document> {
    let mut stats = stats_document(&context.shared.store.engine_stats());
    stats.insert("openCursors", context.shared.cursors.len() as i64);
    Some(stats)
}

/// A counter as BSON's int64 (saturating: no counter gets there).
fn n(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The engine's statistics in serverStatus's shape.
pub fn stats_document(stats: &docstore::EngineStats) -> Document {
    let levels = |values: &[u64]| values.iter().map(|&v| n(v)).collect::<Vec<i64>>();
    doc! {
        "commits": n(stats.commits),
        "messages": n(stats.messages),
        "directLeafWrites": n(stats.direct_leaf_writes),
        "flushes": n(stats.flushes),
        "flushFailures": n(stats.flush_failures),
        "cascades": n(stats.cascades),
        "leafSplits": n(stats.leaf_splits),
        "internalSplits": n(stats.internal_splits),
        "merges": n(stats.merges),
        "flushedBytesByHeight": levels(&stats.flushed_bytes_by_height),
        "nodeCount": n(stats.node_count),
        "bufferedBytesByHeight": levels(&stats.buffered_bytes_by_height),
        "checkpoints": n(stats.checkpoints),
        "checkpointFailures": n(stats.checkpoint_failures),
        "logWriteFailures": n(stats.log_write_failures),
        "nodeWriteFailures": n(stats.node_write_failures),
        "writesRefused": stats.writes_refused.clone().map_or(Bson::Null, Bson::String),
        "checkpointBytes": n(stats.checkpoint_bytes),
        "checkpointMicros": n(stats.checkpoint_micros),
        "lastCheckpoint": stats
            .last_checkpoint_unix_millis
            .map_or(Bson::Null, |ms| Bson::DateTime(DateTime::from_millis(n(ms)))),
        "recovery": {
            "micros": n(stats.recovery.micros),
            "replayedRecords": n(stats.recovery.replayed_records),
            "replayedBytes": n(stats.recovery.replayed_bytes),
        },
        "cache": cache_document(stats),
        "nodeBytesUncompressed": n(stats.node_bytes_uncompressed),
        "nodeBytesWritten": n(stats.node_bytes_written),
        "nodeBytesRead": n(stats.node_bytes_read),
        "nodeBytesWrittenByHeight": levels(&stats.node_bytes_written_by_height),
        "logSyncs": n(stats.log_syncs),
        // Group commit at work: how many commits each log sync covered on average.
        "commitsPerLogSync": if stats.log_syncs > 0 { stats.commits as f64 / stats.log_syncs as f64 } else { 0.0 },
        "logBytes": n(stats.log_bytes),
        "logDiskBytes": n(stats.log_disk_bytes),
        "dataFileBytes": n(stats.data_file_bytes),
        // Where the file's bytes are: node blocks, free space to reuse, blocks waiting for the
        // next checkpoint or for readers; and what checkpoints and `compact` gave back.
        "blockBytes": n(stats.block_bytes),
        "freeBytes": n(stats.free_bytes),
        "retiredBytes": n(stats.retired_bytes),
        "bytesReturned": n(stats.bytes_returned),
    }
}

/// serverStatus.strata.cache: the node cache's size, traffic and what its bytes hold.
fn cache_document(stats: &docstore::EngineStats) -> Document {
    doc! {
        "usedBytes": n(stats.cache_used_bytes),
        "budgetBytes": n(stats.cache_budget_bytes),
        "evictions": n(stats.evictions),
        "loads": n(stats.cache_loads),
        "partialEvictions": n(stats.partial_evictions),
        "headLoads": n(stats.head_loads),
        "sectionLoads": n(stats.section_loads),
        "sectionsStartedEarly": n(stats.sections_started_early),
        "writeBacks": n(stats.write_backs),
        "throttleWaits": n(stats.throttle_waits),
        "writeCopies": n(stats.write_copies),
        // What the used bytes hold: beyond memory, what dirty nodes leave to readers.
        "bytesByKind": {
            "dirty": n(stats.cache_mix.dirty_bytes),
            "clean": n(stats.cache_mix.clean_bytes),
            "sections": n(stats.cache_mix.section_bytes),
            "internalHeads": n(stats.cache_mix.internal_head_bytes),
            "leafHeads": n(stats.cache_mix.leaf_head_bytes),
            "withWriters": n(stats.cache_mix.with_writers_bytes),
            "held": n(stats.cache_mix.held_bytes),
        },
    }
}
