//! Date formatting and format-driven parsing for `$dateToString` / `$dateFromString`.
//!
//! Specifiers (MongoDB's): `%Y %m %d %H %M %S %L %j %w %u %U %V %G %z %Z %b %B %%`.
//! Formatting works on a local calendar time plus the zone's offset; parsing returns the
//! fields it found, and the caller turns them into an instant.

use bson::DateTime;
use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use vocabulary::location;

use super::value::fail;
use crate::error::QueryError;

pub const DEFAULT_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `2018-03-27T16:58:51.538Z`; dates chrono cannot represent fall back to the millisecond count.
pub fn iso_string(date: DateTime) -> String {
    match chrono::DateTime::from_timestamp_millis(date.timestamp_millis()) {
        Some(d) => format_local(&d.naive_utc(), DEFAULT_FORMAT, 0).unwrap_or_default(),
        None => date.timestamp_millis().to_string(),
    }
}

/// Checks a format string's specifiers without formatting anything.
pub fn validate_format(format: &str) -> Result<(), QueryError> {
    let epoch = NaiveDate::from_ymd_opt(2000, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)).unwrap_or_default();
    format_local(&epoch, format, 0).map(|_| ())
}

/// Formats a local time; `offset_minutes` feeds `%z` and `%Z`.
pub fn format_local(local: &NaiveDateTime, format: &str, offset_minutes: i32) -> Result<String, QueryError> {
    let mut out = String::with_capacity(format.len() + 8);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            return Err(fail(location::DATE_FORMAT_UNMATCHED_PERCENT, "Unmatched '%' at end of format string"));
        };
        let piece = match spec {
            'Y' => format!("{:04}", local.year()),
            'm' => format!("{:02}", local.month()),
            'd' => format!("{:02}", local.day()),
            'H' => format!("{:02}", local.hour()),
            'M' => format!("{:02}", local.minute()),
            'S' => format!("{:02}", local.second()),
            'L' => format!("{:03}", local.nanosecond() / 1_000_000),
            'j' => format!("{:03}", local.ordinal()),
            'w' => (local.weekday().num_days_from_sunday() + 1).to_string(),
            'u' => local.weekday().number_from_monday().to_string(),
            'U' => format!("{:02}", sunday_week(local)),
            'V' => format!("{:02}", local.iso_week().week()),
            'G' => format!("{:04}", local.iso_week().year()),
            'z' => {
                let sign = if offset_minutes < 0 { '-' } else { '+' };
                format!("{sign}{:02}{:02}", offset_minutes.abs() / 60, offset_minutes.abs() % 60)
            }
            'Z' => offset_minutes.to_string(),
            'b' => MONTHS.get(local.month0() as usize).map_or("", |m| &m[..3]).to_string(),
            'B' => MONTHS.get(local.month0() as usize).copied().unwrap_or("").to_string(),
            '%' => "%".to_string(),
            other => {
                return Err(fail(
                    location::DATE_FORMAT_INVALID_CHARACTER,
                    format!("Invalid format character '%{other}' in format string"),
                ));
            }
        };
        out.push_str(&piece);
    }
    Ok(out)
}

/// `%U`: week of the year with weeks starting on Sunday; days before the first Sunday are 0.
pub fn sunday_week(local: &NaiveDateTime) -> u32 {
    let day_of_year = local.ordinal0();
    let weekday = local.weekday().num_days_from_sunday();
    (day_of_year + 7 - weekday) / 7
}

/// Fields read by [`parse_with_format`]; missing ones default to the epoch's.
#[derive(Debug, Default)]
pub struct ParsedFields {
    pub year: Option<i32>,
    pub month: Option<u32>,
    pub day: Option<u32>,
    pub day_of_year: Option<u32>,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub millisecond: u32,
    pub offset_minutes: Option<i32>,
}

/// Parses `text` against a MongoDB format; `None` when it does not match.
pub fn parse_with_format(text: &str, format: &str) -> Option<ParsedFields> {
    let mut fields = ParsedFields::default();
    let mut rest = text;
    let mut spec_chars = format.chars();
    while let Some(c) = spec_chars.next() {
        if c != '%' {
            rest = rest.strip_prefix(c)?;
            continue;
        }
        let spec = spec_chars.next()?;
        rest = match spec {
            'Y' => read_number(rest, 4, 4, |v| fields.year = Some(v as i32))?,
            'm' => read_number(rest, 1, 2, |v| fields.month = Some(v))?,
            'd' => read_number(rest, 1, 2, |v| fields.day = Some(v))?,
            'j' => read_number(rest, 1, 3, |v| fields.day_of_year = Some(v))?,
            'H' => read_number(rest, 1, 2, |v| fields.hour = v)?,
            'M' => read_number(rest, 1, 2, |v| fields.minute = v)?,
            'S' => read_number(rest, 1, 2, |v| fields.second = v)?,
            'L' => read_number(rest, 1, 3, |v| fields.millisecond = v)?,
            'z' => {
                let (offset, after) = read_offset(rest)?;
                fields.offset_minutes = Some(offset);
                after
            }
            'Z' => {
                let sign = if rest.starts_with('-') { -1 } else { 1 };
                let digits = rest.trim_start_matches(['+', '-']);
                let mut minutes = 0;
                let after = read_number(digits, 1, 4, |v| minutes = v as i32)?;
                fields.offset_minutes = Some(sign * minutes);
                after
            }
            '%' => rest.strip_prefix('%')?,
            _ => return None,
        };
    }
    rest.is_empty().then_some(fields)
}

fn read_number(text: &str, min: usize, max: usize, mut store: impl FnMut(u32)) -> Option<&str> {
    let width = text.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if width < min {
        return None;
    }
    let (digits, rest) = text.split_at(width);
    store(digits.parse().ok()?);
    Some(rest)
}

/// `Z`, `+HH`, `+HHMM`, `+HH:MM` (and `-`).
pub fn read_offset(text: &str) -> Option<(i32, &str)> {
    if let Some(rest) = text.strip_prefix('Z') {
        return Some((0, rest));
    }
    let sign = match text.chars().next()? {
        '+' => 1,
        '-' => -1,
        _ => return None,
    };
    let body = text.get(1..)?;
    let mut hours = 0;
    let rest = read_number(body, 2, 2, |v| hours = v as i32)?;
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let mut minutes = 0;
    let rest = match read_number(rest, 2, 2, |v| minutes = v as i32) {
        Some(after) => after,
        None => rest,
    };
    Some((sign * (hours * 60 + minutes), rest))
}
