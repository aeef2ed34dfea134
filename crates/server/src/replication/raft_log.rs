//! The consensus library's log lines (slog) into the server's log (tracing), with their
//! key-value pairs: elections, leadership changes and refused proposals show up beside the
//! server's own lines, as mongod's `REPL` and `ELECTION` lines do.

use std::fmt::Write as _;

/// A slog drain that writes each record as a tracing event.
pub struct ToTracing;

struct Pairs<'a>(&'a mut String);

impl slog::Serializer for Pairs<'_> {
    fn emit_arguments(&mut self, key: slog::Key, value: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}

impl slog::Drain for ToTracing {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        let mut pairs = String::new();
        let _ = slog::KV::serialize(&record.kv(), record, &mut Pairs(&mut pairs));
        let _ = slog::KV::serialize(values, record, &mut Pairs(&mut pairs));
        let message = record.msg();
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "raft", "{message}{pairs}"),
            slog::Level::Warning => tracing::warn!(target: "raft", "{message}{pairs}"),
            slog::Level::Info => tracing::info!(target: "raft", "{message}{pairs}"),
            slog::Level::Debug | slog::Level::Trace => tracing::debug!(target: "raft", "{message}{pairs}"),
        }
        Ok(())
    }
}
