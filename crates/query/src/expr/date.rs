//! Date operators: parts (`$year $month $dayOfMonth $dayOfWeek $dayOfYear $hour $minute
//! $second $millisecond $week $isoWeek $isoWeekYear $isoDayOfWeek`), `$dateToString
//! $dateFromString $dateAdd $dateSubtract $dateDiff $dateTrunc`.
//!
//! Time zones (`UTC`, fixed offsets, Olson names with their daylight saving time) are
//! [`super::zone::Zone`]s; all calendar work is done on the local time and converted back.
//! Dates chrono cannot represent (beyond ±262,000 years) are errors.

use bson::{Bson, DateTime};
use chrono::{Datelike, Months, NaiveDate, NaiveDateTime, TimeDelta, Timelike};
use vocabulary::location;

use super::control::{Control, control};
use super::date_format::{DEFAULT_FORMAT, format_local, parse_with_format, sunday_week};
use super::eval::Scope;
use super::parse::{NamedArgCodes, named_args, parse};
use super::value::{EvalResult, Value, bson_type_name, display, fail, is_nullish, type_name};
use super::zone::{UTC, Zone, out_of_range};
use super::{Call, Expr, Func, OpDef};
use crate::error::QueryError;
use crate::number::Num;

type Parser = fn(&'static str, &Bson) -> Result<Expr, QueryError>;

const PARTS: &[(&str, Func)] = &[
    ("$year", |a| part(a, |d| i64::from(d.year()))),
    ("$month", |a| part(a, |d| i64::from(d.month()))),
    ("$dayOfMonth", |a| part(a, |d| i64::from(d.day()))),
    ("$dayOfWeek", |a| part(a, |d| i64::from(d.weekday().num_days_from_sunday() + 1))),
    ("$dayOfYear", |a| part(a, |d| i64::from(d.ordinal()))),
    ("$hour", |a| part(a, |d| i64::from(d.hour()))),
    ("$minute", |a| part(a, |d| i64::from(d.minute()))),
    ("$second", |a| part(a, |d| i64::from(d.second()))),
    ("$millisecond", |a| part(a, |d| i64::from(d.nanosecond() / 1_000_000))),
    ("$week", |a| part(a, |d| i64::from(sunday_week(d)))),
    ("$isoWeek", |a| part(a, |d| i64::from(d.iso_week().week()))),
    ("$isoWeekYear", |a| part_long(a, |d| i64::from(d.iso_week().year()))),
    ("$isoDayOfWeek", |a| part(a, |d| i64::from(d.weekday().number_from_monday()))),
];

const FORMS: &[(&str, Parser)] = &[
    ("$dateToString", parse_date_to_string),
    ("$dateFromString", parse_date_from_string),
    ("$dateAdd", parse_date_add),
    ("$dateSubtract", parse_date_add),
    ("$dateDiff", parse_date_diff),
    ("$dateTrunc", parse_date_trunc),
];

pub fn lookup(name: &str) -> Option<OpDef> {
    if let Some((n, _)) = PARTS.iter().find(|(n, _)| *n == name) {
        return Some(OpDef::Custom(n, parse_part));
    }
    FORMS.iter().find(|(n, _)| *n == name).map(|(n, p)| OpDef::Custom(n, *p))
}

/// A date operand in milliseconds: dates, timestamps and ObjectIds; `Ok(None)` for null.
pub fn date_millis(value: &Value) -> Result<Option<i64>, QueryError> {
    match value {
        None | Some(Bson::Null) | Some(Bson::Undefined) => Ok(None),
        Some(Bson::DateTime(d)) => Ok(Some(d.timestamp_millis())),
        Some(Bson::Timestamp(t)) => Ok(Some(i64::from(t.time) * 1000)),
        Some(Bson::ObjectId(o)) => Ok(Some(o.timestamp().timestamp_millis())),
        Some(other) => Err(fail(
            location::DATE_CONVERSION_UNSUPPORTED,
            format!("can't convert from BSON type {} to Date", bson_type_name(other)),
        )),
    }
}

pub(super) fn date_result(millis: i64) -> EvalResult {
    Ok(Some(Bson::DateTime(DateTime::from_millis(millis))))
}

/// `{$year: <date>}`, `{$year: [<date>]}` or `{$year: {date, timezone}}`.
fn parse_part(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let func = PARTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .ok_or_else(|| fail(crate::error::ErrorCode::InvalidPipelineOperator, "unknown date part"))?;
    let args = match arg {
        Bson::Document(d) if d.contains_key("date") => {
            let codes = NamedArgCodes {
                not_object: location::DATE_PART_ARGUMENT_NOT_OBJECT,
                unknown: location::DATE_PART_UNKNOWN_ARGUMENT,
                missing: location::DATE_PART_MISSING_ARGUMENT,
            };
            named_args(name, arg, &["date", "timezone"], &["date"], codes)?
        }
        Bson::Array(items) if items.len() != 1 => {
            return Err(fail(
                location::DATE_PART_ARRAY_NOT_ONE_ELEMENT,
                format!("{name} accepts exactly one argument if given an array, but was given {}", items.len()),
            ));
        }
        Bson::Array(items) => vec![parse(items.first().unwrap_or(&Bson::Null))?, Expr::Absent],
        other => vec![parse(other)?, Expr::Absent],
    };
    Ok(Expr::Call(Call { name, func, args }))
}

fn part(args: &[Value], extract: fn(&NaiveDateTime) -> i64) -> EvalResult {
    let Some(millis) = date_millis(&args[0])? else { return Ok(Some(Bson::Null)) };
    let Some(zone) = Zone::parse_or_utc(&args[1])? else { return Ok(Some(Bson::Null)) };
    let value = extract(&zone.local_time(millis)?);
    Ok(Some(Bson::Int32(i32::try_from(value).unwrap_or(i32::MAX))))
}

fn part_long(args: &[Value], extract: fn(&NaiveDateTime) -> i64) -> EvalResult {
    let result = part(args, extract)?;
    Ok(match result {
        Some(Bson::Int32(i)) => Some(Bson::Int64(i64::from(i))),
        other => other,
    })
}

fn parse_date_to_string(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_TO_STRING_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_TO_STRING_UNKNOWN_ARGUMENT,
        missing: location::DATE_TO_STRING_MISSING_ARGUMENT,
    };
    let args = named_args(name, arg, &["date", "format", "timezone", "onNull"], &["date"], codes)?;
    if let Some(Expr::Literal(Bson::String(format))) = args.get(1) {
        super::date_format::validate_format(format)?;
    }
    Ok(Expr::Call(Call { name, func: date_to_string, args }))
}

/// Arguments: `[date, format, timezone, onNull]`.
fn date_to_string(args: &[Value]) -> EvalResult {
    let format = match &args[1] {
        None => DEFAULT_FORMAT.to_string(),
        Some(Bson::String(f)) => f.clone(),
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        other => {
            return Err(fail(
                location::DATE_TO_STRING_FORMAT_NOT_STRING,
                format!(
                    "$dateToString requires that 'format' be a string, found: {} with value {}",
                    type_name(other),
                    display(other)
                ),
            ));
        }
    };
    let Some(millis) = date_millis(&args[0])? else {
        // onNull given (even evaluating to missing) replaces a null date.
        return Ok(if args[3].is_some() { args[3].clone() } else { Some(Bson::Null) });
    };
    let Some(zone) = Zone::parse_or_utc(&args[2])? else { return Ok(Some(Bson::Null)) };
    let local = zone.local_time(millis)?;
    Ok(Some(Bson::String(format_local(&local, &format, zone.offset_minutes_at(millis))?)))
}

#[derive(Debug, Clone)]
pub struct DateFromStringSpec {
    date_string: Expr,
    format: Expr,
    timezone: Expr,
    on_error: Option<Expr>,
    on_null: Option<Expr>,
}

fn parse_date_from_string(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_FROM_STRING_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_FROM_STRING_UNKNOWN_ARGUMENT,
        missing: location::DATE_FROM_STRING_MISSING_ARGUMENT,
    };
    let names = ["dateString", "format", "timezone", "onError", "onNull"];
    let mut args = named_args(name, arg, &names, &["dateString"], codes)?.into_iter();
    let mut next = || args.next().unwrap_or(Expr::Absent);
    let present = |e: Expr| if matches!(e, Expr::Absent) { None } else { Some(e) };
    let (date_string, format, timezone) = (next(), next(), next());
    let (on_error, on_null) = (present(next()), present(next()));
    Ok(control(Control::DateFromString(DateFromStringSpec { date_string, format, timezone, on_error, on_null })))
}

pub fn eval_date_from_string(spec: &DateFromStringSpec, scope: &mut Scope<'_>) -> EvalResult {
    let text = scope.eval(&spec.date_string)?;
    let format = scope.eval(&spec.format)?;
    let timezone = scope.eval(&spec.timezone)?;
    let zone = match &timezone {
        None => None,
        tz => match Zone::parse(tz)? {
            Some(zone) => Some(zone),
            None => return Ok(Some(Bson::Null)),
        },
    };
    let text = match text {
        None | Some(Bson::Null) | Some(Bson::Undefined) => {
            return match &spec.on_null {
                Some(e) => scope.eval(e),
                None => Ok(Some(Bson::Null)),
            };
        }
        Some(Bson::String(s)) => s,
        other => {
            let message = format!(
                "$dateFromString requires that 'dateString' be a string, found: {} with value {}",
                type_name(&other),
                display(&other)
            );
            return on_error(spec, scope, fail(crate::error::ErrorCode::ConversionFailure, message));
        }
    };
    let format = match &format {
        None => None,
        Some(Bson::String(f)) => Some(f.clone()),
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        other => {
            return Err(fail(
                location::DATE_FROM_STRING_FORMAT_NOT_STRING,
                format!("$dateFromString requires that 'format' be a string, found: {}", type_name(other)),
            ));
        }
    };
    match parse_date_text(&text, format.as_deref(), zone) {
        Some(millis) => date_result(millis),
        None => on_error(
            spec,
            scope,
            fail(crate::error::ErrorCode::ConversionFailure, format!("Error parsing date string '{text}'")),
        ),
    }
}

fn on_error(spec: &DateFromStringSpec, scope: &mut Scope<'_>, error: QueryError) -> EvalResult {
    match &spec.on_error {
        Some(e) => scope.eval(e),
        None => Err(error),
    }
}

const DEFAULT_PARSE_FORMATS: &[&str] = &[
    "%Y-%m-%dT%H:%M:%S.%L%z",
    "%Y-%m-%dT%H:%M:%S.%L",
    "%Y-%m-%dT%H:%M:%S%z",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%dT%H:%M%z",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S.%L%z",
    "%Y-%m-%d %H:%M:%S.%L",
    "%Y-%m-%d %H:%M:%S %z",
    "%Y-%m-%d %H:%M:%S%z",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d",
];

/// ISO-8601-like date strings, for `$toDate` and `$dateFromString` without a format.
pub fn parse_date_string(text: &str, zone: Option<Zone>) -> Option<i64> {
    parse_date_text(text, None, zone)
}

/// A date string's instant: an offset written in it comes first, then `zone`, then UTC.
fn parse_date_text(text: &str, format: Option<&str>, zone: Option<Zone>) -> Option<i64> {
    let fields = match format {
        Some(f) => parse_with_format(text, f)?,
        None => DEFAULT_PARSE_FORMATS.iter().find_map(|f| parse_with_format(text, f))?,
    };
    let date = match fields.day_of_year {
        Some(doy) => NaiveDate::from_yo_opt(fields.year?, doy)?,
        None => {
            NaiveDate::from_ymd_opt(fields.year.unwrap_or(1970), fields.month.unwrap_or(1), fields.day.unwrap_or(1))?
        }
    };
    let local = date.and_hms_milli_opt(fields.hour, fields.minute, fields.second, fields.millisecond)?;
    let zone = fields.offset_minutes.map(Zone::Fixed).or(zone).unwrap_or(UTC);
    Some(zone.instant_of(&local))
}

/// Calendar units of `$dateAdd`, `$dateDiff`, `$dateTrunc`, and of `$setWindowFields`' time
/// ranges, `$derivative` and `$integral`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    pub fn parse(value: &Value, op: &str) -> Result<Unit, QueryError> {
        let Some(Bson::String(s)) = value else {
            return Err(fail(
                location::DATE_UNIT_NOT_STRING,
                format!("{op} requires 'unit' to be a string, but got {}", type_name(value)),
            ));
        };
        Ok(match s.as_str() {
            "millisecond" => Unit::Millisecond,
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "quarter" => Unit::Quarter,
            "year" => Unit::Year,
            other => {
                return Err(fail(
                    9,
                    format!(
                        "{op} parameter 'unit' value parsing failed :: caused by :: unknown time unit value: {other}"
                    ),
                ));
            }
        })
    }

    /// Fixed length in milliseconds, for units below a month.
    pub fn millis(self) -> Option<i64> {
        match self {
            Unit::Millisecond => Some(1),
            Unit::Second => Some(1_000),
            Unit::Minute => Some(60_000),
            Unit::Hour => Some(3_600_000),
            Unit::Day => Some(86_400_000),
            Unit::Week => Some(7 * 86_400_000),
            _ => None,
        }
    }

    /// `start` plus `amount` of this unit in UTC, as `$dateAdd` adds them (months clamp the
    /// day); `None` on overflow.
    pub fn add_to(self, start: i64, amount: i64) -> Option<i64> {
        match (self.millis(), self.months()) {
            (Some(ms), _) => amount.checked_mul(ms).and_then(|d| start.checked_add(d)),
            (_, Some(months)) => {
                let local = UTC.local_time(start).ok()?;
                Some(UTC.instant_of(&add_months(&local, amount.checked_mul(months)?)?))
            }
            _ => Some(start),
        }
    }

    fn months(self) -> Option<i64> {
        match self {
            Unit::Month => Some(1),
            Unit::Quarter => Some(3),
            Unit::Year => Some(12),
            _ => None,
        }
    }
}

fn parse_date_add(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_ADD_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_ADD_UNKNOWN_ARGUMENT,
        missing: location::DATE_ADD_MISSING_ARGUMENT,
    };
    let names = ["startDate", "unit", "amount", "timezone"];
    let args = named_args(name, arg, &names, &["startDate", "unit", "amount"], codes)?;
    let func: Func =
        if name == "$dateAdd" { |a| date_add(a, "$dateAdd", 1) } else { |a| date_add(a, "$dateSubtract", -1) };
    Ok(Expr::Call(Call { name, func, args }))
}

/// Arguments: `[startDate, unit, amount, timezone]`.
fn date_add(args: &[Value], op: &str, sign: i64) -> EvalResult {
    if args.iter().take(3).any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let start = date_millis(&args[0])?.unwrap_or(0);
    let unit = Unit::parse(&args[1], op)?;
    let amount = args[2].as_ref().and_then(Num::from_bson).and_then(|n| n.to_exact_i64()).ok_or_else(|| {
        fail(
            location::DATE_ADD_AMOUNT_NOT_INTEGER,
            format!("{op} expects integer amount of time units, but got {}", display(&args[2])),
        )
    })?;
    let Some(zone) = Zone::parse_or_utc(&args[3])? else { return Ok(Some(Bson::Null)) };
    let amount = amount.checked_mul(sign).ok_or_else(|| overflow(op))?;
    let result = match (unit.millis(), unit.months()) {
        // Days and weeks are calendar days in the zone: across a clock change a day is 23 or
        // 25 hours, and the local time of day stays.
        (Some(ms), _) if matches!(unit, Unit::Day | Unit::Week) && zone != UTC => {
            let days = TimeDelta::try_milliseconds(amount.checked_mul(ms).ok_or_else(|| overflow(op))?);
            let local = days.and_then(|days| zone.local_time(start).ok()?.checked_add_signed(days));
            zone.instant_of(&local.ok_or_else(|| overflow(op))?)
        }
        (Some(ms), _) => amount.checked_mul(ms).and_then(|d| start.checked_add(d)).ok_or_else(|| overflow(op))?,
        (_, Some(months)) => {
            let local = zone.local_time(start)?;
            let total = amount.checked_mul(months).ok_or_else(|| overflow(op))?;
            zone.instant_of(&add_months(&local, total).ok_or_else(|| overflow(op))?)
        }
        _ => start,
    };
    date_result(result)
}

fn overflow(op: &str) -> QueryError {
    fail(location::DATE_ADD_OVERFLOW, format!("{op} overflowed"))
}

/// Adds months, clamping the day to the end of a shorter month (Jan 31 + 1 month = Feb 28/29).
pub(super) fn add_months(local: &NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let magnitude = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    if months >= 0 { local.checked_add_months(magnitude) } else { local.checked_sub_months(magnitude) }
}

fn parse_date_diff(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_DIFF_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_DIFF_UNKNOWN_ARGUMENT,
        missing: location::DATE_DIFF_MISSING_ARGUMENT,
    };
    let names = ["startDate", "endDate", "unit", "timezone", "startOfWeek"];
    let args = named_args(name, arg, &names, &["startDate", "endDate", "unit"], codes)?;
    Ok(Expr::Call(Call { name, func: date_diff, args }))
}

fn week_start(value: &Value) -> Result<chrono::Weekday, QueryError> {
    let Some(Bson::String(s)) = value else { return Ok(chrono::Weekday::Sun) };
    let day = match s.to_ascii_lowercase().as_str() {
        "sunday" | "sun" => chrono::Weekday::Sun,
        "monday" | "mon" => chrono::Weekday::Mon,
        "tuesday" | "tue" => chrono::Weekday::Tue,
        "wednesday" | "wed" => chrono::Weekday::Wed,
        "thursday" | "thu" => chrono::Weekday::Thu,
        "friday" | "fri" => chrono::Weekday::Fri,
        "saturday" | "sat" => chrono::Weekday::Sat,
        other => return Err(fail(location::DATE_UNKNOWN_DAY_OF_WEEK, format!("unknown day of week value: {other}"))),
    };
    Ok(day)
}

/// Arguments: `[startDate, endDate, unit, timezone, startOfWeek]`; counts unit boundaries crossed.
fn date_diff(args: &[Value]) -> EvalResult {
    if args.iter().take(3).any(is_nullish) {
        return Ok(Some(Bson::Null));
    }
    let (Some(start), Some(end)) = (date_millis(&args[0])?, date_millis(&args[1])?) else {
        return Ok(Some(Bson::Null));
    };
    let unit = Unit::parse(&args[2], "$dateDiff")?;
    let Some(zone) = Zone::parse_or_utc(&args[3])? else { return Ok(Some(Bson::Null)) };
    let first_day = week_start(&args[4])?;
    let (a, b) = (zone.local_time(start)?, zone.local_time(end)?);
    let diff = match unit {
        Unit::Year => i64::from(b.year() - a.year()),
        Unit::Quarter => quarter_index(&b) - quarter_index(&a),
        Unit::Month => month_index(&b) - month_index(&a),
        Unit::Week => {
            let week_of = |d: &NaiveDateTime| {
                let back = (7 + d.weekday().num_days_from_monday() - first_day.num_days_from_monday()) % 7;
                d.date().num_days_from_ce() as i64 - i64::from(back)
            };
            (week_of(&b) - week_of(&a)) / 7
        }
        Unit::Day => i64::from(b.date().num_days_from_ce() - a.date().num_days_from_ce()),
        fixed => {
            let ms = fixed.millis().unwrap_or(1);
            let local_ms = |d: &NaiveDateTime| d.and_utc().timestamp_millis();
            local_ms(&b).div_euclid(ms) - local_ms(&a).div_euclid(ms)
        }
    };
    Ok(Some(Bson::Int64(diff)))
}

fn month_index(d: &NaiveDateTime) -> i64 {
    i64::from(d.year()) * 12 + i64::from(d.month0())
}

fn quarter_index(d: &NaiveDateTime) -> i64 {
    i64::from(d.year()) * 4 + i64::from(d.month0() / 3)
}

fn parse_date_trunc(name: &'static str, arg: &Bson) -> Result<Expr, QueryError> {
    let codes = NamedArgCodes {
        not_object: location::DATE_TRUNC_ARGUMENT_NOT_OBJECT,
        unknown: location::DATE_TRUNC_UNKNOWN_ARGUMENT,
        missing: location::DATE_TRUNC_MISSING_ARGUMENT,
    };
    let names = ["date", "unit", "binSize", "timezone", "startOfWeek"];
    let args = named_args(name, arg, &names, &["date", "unit"], codes)?;
    Ok(Expr::Call(Call { name, func: date_trunc, args }))
}

/// Arguments: `[date, unit, binSize, timezone, startOfWeek]`; bins count from 2000-01-01 local.
fn date_trunc(args: &[Value]) -> EvalResult {
    if is_nullish(&args[0]) || is_nullish(&args[1]) {
        return Ok(Some(Bson::Null));
    }
    let Some(millis) = date_millis(&args[0])? else { return Ok(Some(Bson::Null)) };
    let unit = Unit::parse(&args[1], "$dateTrunc")?;
    let bin = match &args[2] {
        None => 1,
        v => {
            v.as_ref().and_then(Num::from_bson).and_then(|n| n.to_exact_i64()).filter(|b| *b > 0).ok_or_else(|| {
                fail(
                    location::DATE_TRUNC_BIN_SIZE_NOT_POSITIVE,
                    format!(
                        "$dateTrunc requires 'binSize' to be a positive 64-bit integer, but got value '{}'",
                        display(v)
                    ),
                )
            })?
        }
    };
    let Some(zone) = Zone::parse_or_utc(&args[3])? else { return Ok(Some(Bson::Null)) };
    let first_day = week_start(&args[4])?;
    let local = zone.local_time(millis)?;
    let reference =
        NaiveDate::from_ymd_opt(2000, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)).ok_or_else(out_of_range)?;
    let truncated = match (unit, unit.months()) {
        (_, Some(months)) => {
            let span = months * bin;
            let index = (month_index(&local) - month_index(&reference)).div_euclid(span) * span;
            add_months(&reference, index).ok_or_else(out_of_range)?
        }
        (Unit::Week, _) => {
            let ahead = (7 + first_day.num_days_from_monday() - reference.weekday().num_days_from_monday()) % 7;
            let week_reference = reference + TimeDelta::days(i64::from(ahead));
            truncate_fixed(&local, &week_reference, 7 * 86_400_000 * bin)?
        }
        _ => truncate_fixed(&local, &reference, unit.millis().unwrap_or(1).saturating_mul(bin))?,
    };
    date_result(zone.instant_of(&truncated))
}

fn truncate_fixed(local: &NaiveDateTime, reference: &NaiveDateTime, span: i64) -> Result<NaiveDateTime, QueryError> {
    let since = local.and_utc().timestamp_millis() - reference.and_utc().timestamp_millis();
    let kept = since.div_euclid(span) * span;
    reference.checked_add_signed(TimeDelta::milliseconds(kept)).ok_or_else(out_of_range)
}
