//! What a run reports: flat JSON lines (one per interval, one summary) written by `iibench run`
//! and read back by `iibench compare`, and the comparison table built from the summaries.
//!
//! The JSON is flat on purpose: an object of string, integer and float fields, no nesting, so
//! both sides stay a few lines of code with no JSON library.

use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Debug, PartialEq)]
pub enum Field {
    Int(u64),
    Float(f64),
    Text(String),
}

/// One flat JSON object, fields in insertion order.
#[derive(Default)]
pub struct Line {
    fields: Vec<(&'static str, Field)>,
}

impl Line {
    pub fn new(kind: &str) -> Line {
        Line::default().text("type", kind)
    }

    pub fn int(mut self, name: &'static str, value: u64) -> Line {
        self.fields.push((name, Field::Int(value)));
        self
    }

    pub fn float(mut self, name: &'static str, value: f64) -> Line {
        self.fields.push((name, Field::Float(value)));
        self
    }

    pub fn text(mut self, name: &'static str, value: &str) -> Line {
        self.fields.push((name, Field::Text(value.to_string())));
        self
    }

    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (name, field)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "\"{name}\":");
            match field {
                Field::Int(v) => {
                    let _ = write!(out, "{v}");
                }
                Field::Float(v) if v.is_finite() => {
                    let _ = write!(out, "{v:.3}");
                }
                Field::Float(_) => out.push_str("null"),
                Field::Text(s) => push_string(&mut out, s),
            }
        }
        out.push('}');
        out
    }
}

fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parses a flat JSON object as written by [`Line::to_json`]; `None` for anything else.
pub fn parse(line: &str) -> Option<BTreeMap<String, Field>> {
    let mut chars = line.trim().chars().peekable();
    let mut fields = BTreeMap::new();
    (chars.next()? == '{').then_some(())?;
    loop {
        match chars.next()? {
            '}' => return Some(fields),
            ',' => continue,
            '"' => {}
            _ => return None,
        }
        let name = read_string(&mut chars)?;
        (chars.next()? == ':').then_some(())?;
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            Field::Text(read_string(&mut chars)?)
        } else {
            let mut raw = String::new();
            while let Some(c) = chars.next_if(|c| *c != ',' && *c != '}') {
                raw.push(c);
            }
            match raw.parse::<u64>() {
                Ok(v) => Field::Int(v),
                Err(_) => Field::Float(raw.parse::<f64>().unwrap_or(f64::NAN)),
            }
        };
        fields.insert(name, value);
    }
}

fn read_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<String> {
    let mut out = String::new();
    loop {
        match chars.next()? {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
}

/// Typed access to a parsed summary or interval line.
pub struct Record(pub BTreeMap<String, Field>);

impl Record {
    pub fn number(&self, name: &str) -> f64 {
        match self.0.get(name) {
            Some(Field::Int(v)) => *v as f64,
            Some(Field::Float(v)) => *v,
            _ => f64::NAN,
        }
    }

    pub fn text(&self, name: &str) -> &str {
        match self.0.get(name) {
            Some(Field::Text(s)) => s,
            _ => "",
        }
    }
}

/// The comparison: one row per engine, then each engine's durability, then the ratios against
/// the targets of issue 3.
pub fn print_table(outcomes: &[crate::compare::Outcome]) {
    println!();
    println!(
        "{:<7} {:>10} {:>8} {:>10} {:>11} {:>10} {:>10} {:>12} {:>9} {:>9} {:>9} {:>9}",
        "engine",
        "inserts",
        "seconds",
        "overall/s",
        "first10%/s",
        "exit/s",
        "exit/first",
        "written/ins",
        "disk MiB",
        "alloc MiB",
        "rss MiB",
        "peak MiB"
    );
    for outcome in outcomes {
        let name = outcome.engine.as_str();
        let Some(s) = &outcome.summary else {
            println!(
                "{name:<7} failed after {:.0} inserts: {}",
                outcome.last_reported_inserts,
                outcome.failure.as_deref().unwrap_or("no summary")
            );
            continue;
        };
        let partial = if s.number("inserts") < s.number("requested_inserts") { " (partial)" } else { "" };
        println!(
            "{:<7} {:>10.0} {:>8.1} {:>10.0} {:>11.0} {:>10.0} {:>10.2} {:>10.0} B {:>9.1} {:>9.1} {:>9.0} {:>9}{partial}",
            name,
            s.number("inserts"),
            s.number("seconds"),
            s.number("overall_rate"),
            s.number("first_tenth_rate"),
            s.number("exit_rate"),
            s.number("exit_rate") / s.number("first_tenth_rate"),
            s.number("write_bytes_per_insert"),
            mib(s.number("disk_bytes")),
            mib(s.number("allocated_bytes")),
            mib(s.number("peak_rss_bytes")),
            outcome.memcap_peak_mib.map_or("-".to_string(), |p| p.to_string()),
        );
    }
    println!("(written/ins: bytes written to storage per insert, open to close; peak: memcap's peak incl. page cache)");
    for outcome in outcomes {
        if let Some(start) = &outcome.start {
            println!("durability {:<7} {}", outcome.engine.as_str(), start.text("durability"));
        }
        if let Some(summary) = &outcome.summary {
            println!("written    {:<7} measured by {}", outcome.engine.as_str(), summary.text("write_bytes_source"));
        }
    }
    print_ratios(outcomes);
    print_reads(outcomes);
}

/// The read phase, where it ran: point reads and scans per second, node bytes per read, and
/// strata's rates against redb's (targets of issue 18: point reads at least half redb's, scans
/// at least redb's).
fn print_reads(outcomes: &[crate::compare::Outcome]) {
    use crate::EngineName;
    let measured: Vec<_> = outcomes.iter().filter_map(|o| Some((o.engine, o.reads.as_ref()?))).collect();
    if measured.is_empty() {
        return;
    }
    println!();
    println!("{:<7} {:>10} {:>10} {:>12} {:>12}", "engine", "reads", "reads/s", "scans/s", "bytes/read");
    for (engine, r) in &measured {
        let bytes = r.0.contains_key("node_bytes_per_read").then(|| format!("{:.0}", r.number("node_bytes_per_read")));
        println!(
            "{:<7} {:>10.0} {:>10.0} {:>12.1} {:>12}",
            engine.as_str(),
            r.number("reads"),
            r.number("reads_per_second"),
            r.number("scans_per_second"),
            bytes.unwrap_or_else(|| "-".into())
        );
    }
    println!(
        "(scans: {} consecutive entries of a secondary tree each; bytes/read: node bytes read per timed point read)",
        crate::workload::SCAN_LENGTH
    );
    let of = |engine: EngineName| measured.iter().find(|(e, _)| *e == engine).map(|(_, r)| *r);
    if let (Some(strata), Some(redb)) = (of(EngineName::Strata), of(EngineName::Redb)) {
        let verdict = |ratio: f64, target: f64| if ratio >= target { "meets" } else { "MISSES" };
        let reads = strata.number("reads_per_second") / redb.number("reads_per_second");
        let scans = strata.number("scans_per_second") / redb.number("scans_per_second");
        println!("ratio strata reads/s / redb reads/s:   {reads:>8.2}   (target >= 0.5: {})", verdict(reads, 0.5));
        println!("ratio strata scans/s / redb scans/s:   {scans:>8.2}   (target >= 1: {})", verdict(scans, 1.0));
    }
}

fn print_ratios(outcomes: &[crate::compare::Outcome]) {
    use crate::EngineName;
    let exit = |engine: EngineName| match outcomes.iter().find(|o| o.engine == engine) {
        None => Err("not run"),
        Some(outcome) => outcome.summary.as_ref().map(|s| s.number("exit_rate")).ok_or("failed"),
    };
    let strata = outcomes.iter().find(|o| o.engine == EngineName::Strata).and_then(|o| o.summary.as_ref());
    let Some(strata) = strata else {
        println!("ratios: strata did not finish, none to report");
        return;
    };
    let verdict = |ratio: f64, target: f64| if ratio >= target { "meets" } else { "MISSES" };
    let own = strata.number("exit_rate") / strata.number("first_tenth_rate");
    println!("ratio strata exit / strata first 10%: {own:>8.2}   (target >= 0.5: {})", verdict(own, 0.5));
    match exit(EngineName::Redb) {
        Ok(redb) => {
            let ratio = strata.number("exit_rate") / redb;
            println!("ratio strata exit / redb exit:        {ratio:>8.2}   (target >= 10: {})", verdict(ratio, 10.0));
        }
        Err(why) => println!("ratio strata exit / redb exit:        n/a (redb {why})"),
    }
    match exit(EngineName::Fjall) {
        Ok(fjall) => println!("ratio strata exit / fjall exit:       {:>8.2}", strata.number("exit_rate") / fjall),
        Err(why) => println!("ratio strata exit / fjall exit:       n/a (fjall {why})"),
    }
}

pub fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: what `run` writes, `compare` reads back. Method: a line with every kind of field,
    /// including quotes and control characters, round-trips.
    #[test]
    fn line_round_trips() {
        let line =
            Line::new("summary").int("inserts", 300_000).float("exit_rate", 1234.5).text("durability", "a \"b\"\\c\n");
        let fields = parse(&line.to_json()).map(Record);
        let record =
            fields.as_ref().map(|r| (r.text("type"), r.number("inserts"), r.number("exit_rate"), r.text("durability")));
        assert_eq!(record, Some(("summary", 300_000.0, 1234.5, "a \"b\"\\c\n")));
        assert!(parse("not json").is_none());
    }
}
