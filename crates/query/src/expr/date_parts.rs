//! `$dateFromParts` and `$dateToParts`: a date from calendar fields (natural or ISO week
//! date) in a time zone, and back.
//!
//! Fields out of their usual range carry, as in MongoDB: month 14 is February of the next
//! year, day 0 the last day of the month before, hour -1 the last hour of the day before. The
//! year is 1-9999; every other field must fit in [-32768, 32767]. A field given that is null
//! or missing makes the result null.

use bson::{Bson, Document};
use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Weekday};
use vocabulary::location;

use super::date::{add_months, date_millis, date_result};
use super::parse::{NamedArgCodes, named_args};
use super::value::{EvalResult, Value, display, fail, type_name};
use super::zone::{UTC, Zone, out_of_range};
use super::{Call, Expr, OpDef};
use crate::error::QueryError;
use crate::number::Num;

const NATURAL: [&str; 3] = ["year", "month", "day"];
const ISO: [&str; 3] = ["isoWeekYear", "isoWeek", "isoDayOfWeek"];
/// `$dateFromParts`'s arguments, in this order (the natural date, the ISO date, the time of
/// day, the zone), then a literal mask of those given.
const FROM_PARTS: [&str; 11] = [
    "year",
    "month",
    "day",
    "isoWeekYear",
    "isoWeek",
    "isoDayOfWeek",
    "hour",
    "minute",
    "second",
    "millisecond",
    "timezone",
];

pub fn lookup(name: &str) -> Option<OpDef> {
    match name {
        "$dateFromParts" => Some(OpDef::Custom("$dateFromParts", parse_from_parts)),
        "$dateToParts" => Some(OpDef::Custom("$dateToParts", parse_to_parts)),
        _ => None,
    }
}

fn parse_from_parts(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_FROM_PARTS_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_FROM_PARTS_UNKNOWN_ARGUMENT,
        missing: location::DATE_FROM_PARTS_MISSING_ARGUMENT,
    };
    let mut args = named_args(name, arg, &FROM_PARTS, &[], codes)?;
    let given: Vec<bool> = args.iter().map(|expr| !matches!(expr, Expr::Absent)).collect();
    let any = |names: &[&str]| names.iter().any(|n| given[FROM_PARTS.iter().position(|f| f == n).unwrap_or(0)]);
    if any(&NATURAL) && any(&ISO) {
        return Err(fail(
            location::DATE_FROM_PARTS_MIXES_ISO_AND_NATURAL,
            "$dateFromParts does not allow mixing natural dates with ISO dates",
        ));
    }
    if !any(&["year", "isoWeekYear"]) {
        return Err(fail(
            location::DATE_FROM_PARTS_MISSING_ARGUMENT,
            "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
        ));
    }
    let mask = given.iter().enumerate().fold(0i32, |mask, (i, &g)| if g { mask | 1 << i } else { mask });
    args.push(Expr::Literal(Bson::Int32(mask)));
    Ok(Expr::Call(Call { name, func: from_parts, args }))
}

/// Arguments: `FROM_PARTS`, then the mask of the ones given.
fn from_parts(args: &[Value]) -> EvalResult {
    let Some(Bson::Int32(mask)) = args[FROM_PARTS.len()] else { return Ok(Some(Bson::Null)) };
    let given = |i: usize| mask & (1 << i) != 0;
    let mut fields = [0i64; 10];
    for (i, name) in FROM_PARTS.iter().take(10).enumerate() {
        fields[i] = match &args[i] {
            _ if !given(i) => default_of(name),
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
            Some(value) => field(name, value)?,
        };
    }
    let zone = match &args[10] {
        _ if !given(10) => UTC,
        tz => match Zone::parse(tz)? {
            Some(zone) => zone,
            None => return Ok(Some(Bson::Null)),
        },
    };
    let iso = given(3);
    let day_start =
        if iso { iso_week_date(&fields[3..6]) } else { natural_date(&fields[..3]) }.ok_or_else(out_of_range)?;
    let time = TimeDelta::hours(fields[6])
        + TimeDelta::minutes(fields[7])
        + TimeDelta::seconds(fields[8])
        + TimeDelta::milliseconds(fields[9]);
    let local = day_start.checked_add_signed(time).ok_or_else(out_of_range)?;
    date_result(zone.instant_of(&local))
}

fn default_of(name: &str) -> i64 {
    match name {
        "month" | "day" | "isoWeek" | "isoDayOfWeek" => 1,
        _ => 0,
    }
}

/// A field's integer value, checked against its range.
fn field(name: &str, value: &Bson) -> Result<i64, QueryError> {
    let integer = Num::from_bson(value).and_then(|n| n.to_exact_i64()).ok_or_else(|| {
        fail(
            location::DATE_PART_NOT_INTEGER,
            format!(
                "'{name}' must evaluate to an integer, found {} with value {}",
                type_name(&Some(value.clone())),
                display(&Some(value.clone()))
            ),
        )
    })?;
    let year = matches!(name, "year" | "isoWeekYear");
    if year && !(1..=9999).contains(&integer) {
        let code =
            if name == "year" { location::DATE_YEAR_OUT_OF_RANGE } else { location::DATE_ISO_WEEK_YEAR_OUT_OF_RANGE };
        return Err(fail(
            code,
            format!("'{name}' must evaluate to an integer in the range 1 to 9999, found {integer}"),
        ));
    }
    if !year && !(-32768..=32767).contains(&integer) {
        return Err(fail(
            location::DATE_PART_OUT_OF_RANGE,
            format!("'{name}' must evaluate to a value in the range [-32768, 32767]; value {integer} is not in range"),
        ));
    }
    Ok(integer)
}

/// `[year, month, day]`, months and days carrying.
fn natural_date(parts: &[i64]) -> Option<NaiveDateTime> {
    let january = NaiveDate::from_ymd_opt(i32::try_from(parts[0]).ok()?, 1, 1)?.and_hms_opt(0, 0, 0)?;
    add_months(&january, parts[1] - 1)?.checked_add_signed(TimeDelta::days(parts[2] - 1))
}

/// `[isoWeekYear, isoWeek, isoDayOfWeek]`, weeks and days carrying.
fn iso_week_date(parts: &[i64]) -> Option<NaiveDateTime> {
    let first_monday =
        NaiveDate::from_isoywd_opt(i32::try_from(parts[0]).ok()?, 1, Weekday::Mon)?.and_hms_opt(0, 0, 0)?;
    first_monday.checked_add_signed(TimeDelta::weeks(parts[1] - 1) + TimeDelta::days(parts[2] - 1))
}

fn parse_to_parts(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_TO_PARTS_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_TO_PARTS_UNKNOWN_ARGUMENT,
        missing: location::DATE_TO_PARTS_MISSING_ARGUMENT,
    };
    let args = named_args(name, arg, &["date", "timezone", "iso8601"], &["date"], codes)?;
    Ok(Expr::Call(Call { name, func: to_parts, args }))
}

/// Arguments: `[date, timezone, iso8601]`.
fn to_parts(args: &[Value]) -> EvalResult {
    let iso = match &args[2] {
        None => false,
        Some(Bson::Boolean(iso)) => *iso,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        other => {
            return Err(fail(
                location::DATE_TO_PARTS_ISO8601_NOT_BOOL,
                format!("iso8601 must evaluate to a bool, found {}", type_name(other)),
            ));
        }
    };
    let Some(millis) = date_millis(&args[0])? else { return Ok(Some(Bson::Null)) };
    let Some(zone) = Zone::parse_or_utc(&args[1])? else { return Ok(Some(Bson::Null)) };
    let local = zone.local_time(millis)?;
    let date: [(&str, u32); 3] = if iso {
        let week = local.iso_week();
        [
            ("isoWeekYear", week.year() as u32),
            ("isoWeek", week.week()),
            ("isoDayOfWeek", local.weekday().number_from_monday()),
        ]
    } else {
        [("year", local.year() as u32), ("month", local.month()), ("day", local.day())]
    };
    let time = [
        ("hour", local.hour()),
        ("minute", local.minute()),
        ("second", local.second()),
        ("millisecond", local.nanosecond() / 1_000_000),
    ];
    let parts: Document =
        date.into_iter().chain(time).map(|(name, value)| (name.to_string(), Bson::Int32(value as i32))).collect();
    Ok(Some(Bson::Document(parts)))
}
