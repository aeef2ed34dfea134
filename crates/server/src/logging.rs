//! Logs as mongod 4.4+ writes them: one JSON object per line with `t` (time), `s` (severity:
//! F/E/W/I/D1/D2), `c` (component: NETWORK, ACCESS, COMMAND, STORAGE, CONTROL...), `id` (a
//! number naming the log statement), `ctx` (the connection, `conn12`, or the thread), `msg` and
//! `attr` (the event's fields); or, with `--logFormat text`, the same on one readable line. A
//! `tracing` layer formats every event; lines go to stderr or to `--logpath` (rotated by the
//! `logRotate` command and by SIGUSR1: the file is renamed with the time appended and a new
//! one opened, as mongod's "rename" mode does), and the last [`RECENT_LINES`] JSON lines are
//! kept for `getLog: "global"`.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Lines `getLog: "global"` returns (mongod keeps about as many).
pub const RECENT_LINES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    pub fn parse(text: &str) -> Option<LogFormat> {
        match text {
            "json" => Some(LogFormat::Json),
            "text" | "plain" => Some(LogFormat::Text),
            _ => None,
        }
    }
}

struct Logs {
    format: LogFormat,
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
    recent: Mutex<VecDeque<String>>,
    written: AtomicU64,
}

static LOGS: OnceLock<Logs> = OnceLock::new();

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Installs the process's log subscriber (`RUST_LOG` filters, default `info`). Call once.
pub fn init(format: LogFormat, path: Option<PathBuf>) -> Result<(), String> {
    let file = match &path {
        Some(path) => Some(open(path)?),
        None => None,
    };
    let logs =
        Logs { format, path, file: Mutex::new(file), recent: Mutex::new(VecDeque::new()), written: AtomicU64::new(0) };
    LOGS.set(logs).map_err(|_| "logging is already initialized".to_owned())?;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry().with(filter).with(MongodLayer).try_init().map_err(|error| error.to_string())
}

fn open(path: &PathBuf) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("cannot open the log file {}: {error}", path.display()))
}

/// `logRotate` and SIGUSR1: the log file is renamed `<path>.<UTC time>` and a new one opened.
/// Logging to stderr has nothing to rotate.
pub fn rotate() -> Result<Option<PathBuf>, String> {
    let Some(logs) = LOGS.get() else { return Ok(None) };
    let Some(path) = &logs.path else { return Ok(None) };
    let mut file = lock(&logs.file);
    let stamp = bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default().replace(':', "-");
    let mut rotated = PathBuf::from(format!("{}.{stamp}", path.display()));
    for attempt in 1.. {
        if !rotated.exists() {
            break;
        }
        rotated = PathBuf::from(format!("{}.{stamp}-{attempt}", path.display()));
    }
    std::fs::rename(path, &rotated).map_err(|error| format!("cannot rename {}: {error}", path.display()))?;
    *file = Some(open(path)?);
    Ok(Some(rotated))
}

/// The lines kept for `getLog: "global"` (JSON, oldest first) and how many were written.
pub fn recent() -> (u64, Vec<String>) {
    match LOGS.get() {
        Some(logs) => (logs.written.load(Relaxed), lock(&logs.recent).iter().cloned().collect()),
        None => (0, Vec::new()),
    }
}

/// One line in mongod's JSON shape, stamped now (for lines kept outside the log, such as
/// `getLog: "startupWarnings"`).
pub fn json_line(severity: &'static str, component: &'static str, context: &str, message: &str) -> String {
    let entry = Entry {
        time: bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default(),
        severity,
        component,
        id: statement_id(component, 0),
        context: context.to_owned(),
        message: message.to_owned(),
        attributes: Map::new(),
    };
    entry.json()
}

struct MongodLayer;

impl<S: Subscriber> tracing_subscriber::Layer<S> for MongodLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let Some(logs) = LOGS.get() else { return };
        let mut fields = Fields::default();
        event.record(&mut fields);
        let metadata = event.metadata();
        let entry = Entry {
            time: bson::DateTime::now().try_to_rfc3339_string().unwrap_or_default(),
            severity: severity(*metadata.level()),
            component: component(metadata.target()),
            id: statement_id(metadata.file().unwrap_or_default(), metadata.line().unwrap_or_default()),
            context: fields.connection.map_or_else(thread_context, |id| format!("conn{id}")),
            message: fields.message,
            attributes: fields.attributes,
        };
        let json_line = entry.json();
        let line = match logs.format {
            LogFormat::Json => json_line.clone(),
            LogFormat::Text => entry.text(),
        };
        write(logs, &line);
        logs.written.fetch_add(1, Relaxed);
        let mut recent = lock(&logs.recent);
        if recent.len() == RECENT_LINES {
            recent.pop_front();
        }
        recent.push_back(json_line);
    }
}

fn write(logs: &Logs, line: &str) {
    let mut file = lock(&logs.file);
    let written = match file.as_mut() {
        Some(file) => writeln!(file, "{line}"),
        None => writeln!(std::io::stderr().lock(), "{line}"),
    };
    // Nowhere left to report a failed log write; the line is still kept for getLog.
    drop(written);
}

struct Entry {
    time: String,
    severity: &'static str,
    component: &'static str,
    id: u32,
    context: String,
    message: String,
    attributes: Map<String, Value>,
}

impl Entry {
    /// The JSON line, its keys in mongod's order.
    fn json(&self) -> String {
        let text = |value: &str| Value::String(value.to_owned()).to_string();
        let mut line = format!(
            "{{\"t\":{{\"$date\":{}}},\"s\":{},\"c\":{},\"id\":{},\"ctx\":{},\"msg\":{}",
            text(&self.time),
            text(self.severity),
            text(self.component),
            self.id,
            text(&self.context),
            text(&self.message),
        );
        if !self.attributes.is_empty() {
            line.push_str(",\"attr\":");
            line.push_str(&Value::Object(self.attributes.clone()).to_string());
        }
        line.push('}');
        line
    }

    fn text(&self) -> String {
        let mut line =
            format!("{} {:<2} {:<8} [{}] {}", self.time, self.severity, self.component, self.context, self.message);
        for (key, value) in &self.attributes {
            match value {
                Value::String(text) => line.push_str(&format!(" {key}={text}")),
                other => line.push_str(&format!(" {key}={other}")),
            }
        }
        line
    }
}

fn severity(level: Level) -> &'static str {
    match level {
        Level::ERROR => "E",
        Level::WARN => "W",
        Level::INFO => "I",
        Level::DEBUG => "D1",
        Level::TRACE => "D2",
    }
}

/// mongod's component for a module of Strata.
fn component(target: &str) -> &'static str {
    let module = target.split("::").take(2).collect::<Vec<_>>().join("::");
    match module.as_str() {
        "server::connection" | "server::listener" | "server::http" => "NETWORK",
        "server::auth" | "server::tls" => "ACCESS",
        "server::slow" | "server::dispatch" | "server::commands" => "COMMAND",
        _ if target.starts_with("storage") => "STORAGE",
        _ if target.starts_with("docstore") => "QUERY",
        _ if target.starts_with("strata") || target.starts_with("cli") => "CONTROL",
        _ => "-",
    }
}

/// A stable number for a log statement (its file and line), as mongod's ids name theirs.
fn statement_id(file: &str, line: u32) -> u32 {
    // FNV-1a: stable across builds of the same source, unlike the std hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for byte in file.bytes().chain(line.to_le_bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash % 10_000_000
}

fn thread_context() -> String {
    std::thread::current().name().unwrap_or("main").to_owned()
}

#[derive(Default)]
struct Fields {
    message: String,
    connection: Option<i64>,
    attributes: Map<String, Value>,
}

impl Visit for Fields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "connection" {
            self.connection = Some(value);
        } else {
            self.attributes.insert(field.name().to_owned(), json!(value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.attributes.insert(field.name().to_owned(), json!(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.insert(field.name().to_owned(), json!(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.insert(field.name().to_owned(), json!(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_text(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_text(field, format!("{value:?}"));
    }
}

/// Fields that carry a document (a slow operation's `command`) are given as Extended JSON
/// text and logged as the object, as mongod logs them.
const DOCUMENT_FIELDS: &[&str] = &["command"];

impl Fields {
    fn record_text(&mut self, field: &Field, text: String) {
        if field.name() == "message" {
            self.message = text;
            return;
        }
        let value = match serde_json::from_str::<Value>(&text) {
            Ok(object @ Value::Object(_)) if DOCUMENT_FIELDS.contains(&field.name()) => object,
            _ => Value::String(text),
        };
        self.attributes.insert(field.name().to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_mongods_shape() {
        let mut attributes = Map::new();
        attributes.insert("durationMillis".into(), json!(120));
        let entry = Entry {
            time: "2026-01-01T00:00:00.000Z".into(),
            severity: "I",
            component: "COMMAND",
            id: 51803,
            context: "conn7".into(),
            message: "Slow query".into(),
            attributes,
        };
        let text = entry.json();
        assert!(text.starts_with("{\"t\":{\"$date\":"), "{text}");
        let line: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(line["t"]["$date"], "2026-01-01T00:00:00.000Z");
        assert_eq!(line["s"], "I");
        assert_eq!(line["c"], "COMMAND");
        assert_eq!(line["ctx"], "conn7");
        assert_eq!(line["attr"]["durationMillis"], 120);
        assert_eq!(entry.text(), "2026-01-01T00:00:00.000Z I  COMMAND  [conn7] Slow query durationMillis=120");
        assert_eq!(component("server::connection"), "NETWORK");
        assert_eq!(component("storage::engine"), "STORAGE");
        assert_eq!(statement_id("a.rs", 1), statement_id("a.rs", 1));
        assert_ne!(statement_id("a.rs", 1), statement_id("a.rs", 2));
    }
}
