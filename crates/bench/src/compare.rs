//! `strata bench compare A.json B.json`: two runs side by side. Series are matched by name,
//! measurements by series and name; each row shows A, B and B/A. For rates a ratio above 1
//! means B is faster; for seconds and milliseconds, slower.

use std::fmt::Write as _;

use crate::args::CompareArgs;
use crate::results::RunResults;

pub fn run(args: &CompareArgs) -> anyhow::Result<()> {
    let a = RunResults::read(&args.a)?;
    let b = RunResults::read(&args.b)?;
    print!("{}", render(&a, &b));
    Ok(())
}

pub fn render(a: &RunResults, b: &RunResults) -> String {
    let mut out = String::new();
    let _ =
        writeln!(out, "A: {} {} — server {} — {}", a.workload, a.started_at, a.server.version(), a.machine.summary());
    let _ =
        writeln!(out, "B: {} {} — server {} — {}", b.workload, b.started_at, b.server.version(), b.machine.summary());
    if a.workload != b.workload {
        let _ = writeln!(out, "note: different workloads");
    }
    let mut table = Table::default();
    for series_a in &a.series {
        let Some(series_b) = b.series.iter().find(|series| series.name == series_a.name) else {
            let _ = writeln!(out, "series only in A: {}", series_a.name);
            continue;
        };
        let rows = [
            ("docs/s", series_a.rate, series_b.rate),
            ("first 10% docs/s", series_a.first_tenth_rate, series_b.first_tenth_rate),
            ("exit velocity docs/s", series_a.exit_velocity, series_b.exit_velocity),
            ("seconds", series_a.seconds, series_b.seconds),
        ];
        for (what, value_a, value_b) in rows {
            table.row(&series_a.name, what, value_a, value_b);
        }
    }
    for series_b in b.series.iter().filter(|series| !a.series.iter().any(|other| other.name == series.name)) {
        let _ = writeln!(out, "series only in B: {}", series_b.name);
    }
    for measurement_a in &a.measurements {
        let matching = b.measurements.iter().find(|m| m.series == measurement_a.series && m.name == measurement_a.name);
        if let Some(measurement_b) = matching {
            let what = format!("{} ({})", measurement_a.name, measurement_a.unit);
            table.row(&measurement_a.series, &what, measurement_a.value, measurement_b.value);
        }
    }
    out.push_str(&table.render());
    out
}

#[derive(Default)]
struct Table {
    rows: Vec<[String; 5]>,
}

impl Table {
    fn row(&mut self, series: &str, what: &str, a: f64, b: f64) {
        let ratio = if a != 0.0 { format!("{:.2}x", b / a) } else { "-".to_owned() };
        self.rows.push([series.to_owned(), what.to_owned(), number(a), number(b), ratio]);
    }

    fn render(&self) -> String {
        let header = ["series", "measure", "A", "B", "B/A"].map(str::to_owned);
        let all: Vec<&[String; 5]> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> =
            (0..5).map(|column| all.iter().map(|row| row[column].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for row in all {
            let _ = writeln!(
                out,
                "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  {:>w4$}",
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4]
            );
        }
        out
    }
}

fn number(value: f64) -> String {
    if value.abs() >= 100.0 { format!("{value:.0}") } else { format!("{value:.3}") }
}
