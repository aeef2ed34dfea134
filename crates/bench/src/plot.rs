//! The plot of a run: insert rate (docs/s per interval) against documents inserted, every
//! series on one chart — with-index series solid, without-index series dashed — so a cliff, or
//! its absence, shows at a glance. The same drawing goes to SVG and to PNG.
//!
//! Pure Rust: plotters' SVG backend, and its bitmap backend with DejaVu Sans embedded (the
//! `dejavu` crate, through plotters' `ab_glyph` feature), so drawing text needs no system font
//! library (fontconfig/freetype).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::results::RunResults;

const SIZE: (u32, u32) = (1100, 650);
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

pub fn draw(results: &RunResults, svg: &Path, png: &Path) -> anyhow::Result<()> {
    register_font()?;
    draw_on(SVGBackend::new(svg, SIZE).into_drawing_area(), results)?;
    draw_on(BitMapBackend::new(png, SIZE).into_drawing_area(), results)
}

/// Registers the embedded font under the family name the chart asks for, once per process.
fn register_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok { Ok(()) } else { Err(anyhow!("the embedded DejaVu Sans font did not load")) }
}

fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, results: &RunResults) -> anyhow::Result<()> {
    let error = |error: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing the plot: {error}");
    root.fill(&WHITE).map_err(error)?;
    let max_docs = results.series.iter().map(|series| series.docs).max().unwrap_or(1).max(1);
    let max_rate = results
        .series
        .iter()
        .flat_map(|series| series.intervals.iter().map(|interval| interval.rate))
        .fold(1.0_f64, f64::max);
    // `clients` puts connections on the x axis and each level's total rate on the y axis.
    let (x_axis, y_axis) = match results.workload.as_str() {
        "clients" => ("connections", "inserts/s (all connections)"),
        _ => ("documents inserted", "inserts/s (per interval)"),
    };
    let title = format!("strata bench {}: insert rate by {x_axis}", results.workload);
    let subtitle = format!("server {} · {}", results.server.version(), results.machine.summary());
    let (header, body) = root.split_vertically(60);
    header.draw(&Text::new(title, (20, 8), ("sans-serif", 22))).map_err(error)?;
    header
        .draw(&Text::new(subtitle, (20, 36), ("sans-serif", 14).into_font().color(&RGBColor(90, 90, 90))))
        .map_err(error)?;

    let mut chart = ChartBuilder::on(&body)
        .margin(15)
        .margin_right(45)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0u64..max_docs, 0.0..max_rate * 1.1)
        .map_err(error)?;
    chart
        .configure_mesh()
        .x_desc(x_axis)
        .y_desc(y_axis)
        .x_label_formatter(&|docs| thousands(*docs))
        .y_label_formatter(&|rate| thousands(*rate as u64))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(error)?;

    for (index, series) in results.series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let points: Vec<(u64, f64)> = series.intervals.iter().map(|interval| (interval.docs, interval.rate)).collect();
        let style = color.stroke_width(2);
        let indexed = series.indexed;
        let drawn = if indexed {
            chart.draw_series(LineSeries::new(points.clone(), style)).map_err(error)?
        } else {
            chart.draw_series(DashedLineSeries::new(points.clone(), 8, 5, style)).map_err(error)?
        };
        // The legend's mark is drawn as the curve is: solid with the index, dashed without.
        let gap = if indexed { 8 } else { 14 };
        let label = if series.partial { format!("{} (stopped early)", series.name) } else { series.name.clone() };
        drawn.label(label).legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 0), (8, 0)], style)
                + PathElement::new(vec![(gap, 0), (22, 0)], style)
        });
        chart.draw_series(points.iter().map(|&point| Circle::new(point, 3, color.filled()))).map_err(error)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(error)?;
    root.present().map_err(error)
}

/// 1234567 → "1,234,567".
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::thousands;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
