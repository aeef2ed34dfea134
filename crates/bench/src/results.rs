//! The results of one run and their files: `<name>.json` (everything, the input of `compare`)
//! and `<name>.csv` (the same in long form: one value per row, `record` saying what it is).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::machine::Machine;
use crate::recorder::{Interval, Rates};

/// Bumped when a field changes meaning.
pub const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RunResults {
    pub format: u32,
    pub workload: String,
    /// UTC, RFC 3339.
    pub started_at: String,
    /// `git describe` of the bench's source when it was built.
    pub bench_commit: String,
    pub command_line: Vec<String>,
    pub machine: Machine,
    pub server: ServerInfo,
    pub parameters: BTreeMap<String, serde_json::Value>,
    pub series: Vec<Series>,
    pub measurements: Vec<Measurement>,
    /// Errors from the server (e.g. a query it cannot run yet), and the run's own failure.
    pub errors: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct ServerInfo {
    pub started_by_bench: bool,
    /// The server's `buildInfo` reply.
    pub build_info: serde_json::Value,
    pub memory_limit: Option<String>,
    pub cache_size: Option<String>,
    /// Peak of the memory cgroup (page cache included), with --memory-limit.
    pub peak_memory_bytes: Option<u64>,
    pub exit_status: Option<String>,
}

impl ServerInfo {
    pub fn version(&self) -> String {
        let version = self.build_info.get("version").and_then(|v| v.as_str()).unwrap_or("?");
        let git = self.build_info.get("gitVersion").and_then(|v| v.as_str()).unwrap_or("?");
        format!("{version} ({git})")
    }
}

/// One insert run on an empty database.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Series {
    pub name: String,
    /// Whether the collection had the workload's secondary indexes.
    pub indexed: bool,
    pub write_concern: String,
    pub docs: u64,
    pub seconds: f64,
    pub rate: f64,
    pub first_tenth_rate: f64,
    pub exit_velocity: f64,
    /// `count_documents({})` on the server after the series (must equal `docs`); none when the
    /// series or the count failed.
    pub server_count: Option<u64>,
    /// The series stopped early (the server failed): its rates cover what was inserted.
    #[serde(default)]
    pub partial: bool,
    pub intervals: Vec<Interval>,
}

impl Series {
    pub fn new(name: String, indexed: bool, write_concern: &str, rates: Rates) -> Series {
        Series {
            name,
            indexed,
            write_concern: write_concern.to_owned(),
            docs: rates.docs,
            seconds: rates.seconds,
            rate: rates.rate,
            first_tenth_rate: rates.first_tenth_rate,
            exit_velocity: rates.exit_velocity,
            server_count: None,
            partial: false,
            intervals: rates.intervals,
        }
    }
}

/// Anything else a workload measures: query latencies, build times, per-client times.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Measurement {
    pub series: String,
    pub name: String,
    pub value: f64,
    pub unit: String,
}

impl RunResults {
    pub fn read(path: &Path) -> anyhow::Result<RunResults> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }

    pub fn write_csv(&self, path: &Path) -> anyhow::Result<()> {
        std::fs::write(path, self.to_csv()).with_context(|| format!("writing {}", path.display()))
    }

    /// Columns `record,series,name,docs,elapsed_seconds,value,unit`; `record` is one of machine,
    /// server, parameter, interval_rate, cumulative_rate, summary, measurement, error.
    pub fn to_csv(&self) -> String {
        let mut csv = String::from("record,series,name,docs,elapsed_seconds,value,unit\n");
        let mut row = |record: &str,
                       series: &str,
                       name: &str,
                       docs: Option<u64>,
                       elapsed: Option<f64>,
                       value: &str,
                       unit: &str| {
            let docs = docs.map(|d| d.to_string()).unwrap_or_default();
            let elapsed = elapsed.map(|e| format!("{e:.3}")).unwrap_or_default();
            let fields = [record, series, name, &docs, &elapsed, value, unit];
            let line: Vec<String> = fields.iter().map(|field| quote(field)).collect();
            let _ = writeln!(csv, "{}", line.join(","));
        };
        let machine = &self.machine;
        row("machine", "", "cpu_model", None, None, &machine.cpu_model, "");
        row("machine", "", "cores", None, None, &machine.cores.to_string(), "");
        row("machine", "", "memory", None, None, &machine.memory_bytes.to_string(), "bytes");
        row("machine", "", "os", None, None, &machine.os, "");
        row("machine", "", "kernel", None, None, &machine.kernel, "");
        row("server", "", "version", None, None, &self.server.version(), "");
        row("server", "", "started_by_bench", None, None, &self.server.started_by_bench.to_string(), "");
        for (key, value) in [("memory_limit", &self.server.memory_limit), ("cache_size", &self.server.cache_size)] {
            row("server", "", key, None, None, value.as_deref().unwrap_or(""), "");
        }
        if let Some(peak) = self.server.peak_memory_bytes {
            row("server", "", "peak_memory", None, None, &peak.to_string(), "bytes");
        }
        row("server", "", "bench_commit", None, None, &self.bench_commit, "");
        for (key, value) in &self.parameters {
            let text = value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
            row("parameter", "", key, None, None, &text, "");
        }
        for series in &self.series {
            for interval in &series.intervals {
                let number = interval.number.to_string();
                let at = (Some(interval.docs), Some(interval.elapsed_seconds));
                row("interval_rate", &series.name, &number, at.0, at.1, &format!("{:.1}", interval.rate), "docs/s");
                row(
                    "cumulative_rate",
                    &series.name,
                    &number,
                    at.0,
                    at.1,
                    &format!("{:.1}", interval.cumulative_rate),
                    "docs/s",
                );
            }
            let end = (Some(series.docs), Some(series.seconds));
            row("summary", &series.name, "rate", end.0, end.1, &format!("{:.1}", series.rate), "docs/s");
            row(
                "summary",
                &series.name,
                "first_tenth_rate",
                end.0,
                end.1,
                &format!("{:.1}", series.first_tenth_rate),
                "docs/s",
            );
            row(
                "summary",
                &series.name,
                "exit_velocity",
                end.0,
                end.1,
                &format!("{:.1}", series.exit_velocity),
                "docs/s",
            );
            let count = series.server_count.map(|count| count.to_string()).unwrap_or_default();
            row("summary", &series.name, "server_count", end.0, end.1, &count, "docs");
            row("summary", &series.name, "partial", end.0, end.1, &series.partial.to_string(), "");
        }
        for measurement in &self.measurements {
            row(
                "measurement",
                &measurement.series,
                &measurement.name,
                None,
                None,
                &format!("{}", measurement.value),
                &measurement.unit,
            );
        }
        for error in &self.errors {
            row("error", "", "", None, None, error, "");
        }
        csv
    }
}

/// RFC 4180 quoting where needed.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn csv_quoting() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
