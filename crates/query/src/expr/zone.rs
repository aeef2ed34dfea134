//! Time zones of the date operators: `UTC`/`GMT`, fixed offsets (`+05:30`, `-0500`, `+03`) and
//! Olson names (`America/New_York`, from the IANA database `chrono-tz` compiles in), whose
//! offset depends on the instant (daylight saving time).
//!
//! Calendar work is done on the local time and converted back. A local time that a clock
//! change repeats (fall back) is its earlier instant; one it skips (spring forward) is read
//! with the offset in force before the change, so it lands past the gap (02:30 in New York on
//! the day clocks go to 03:00 is 03:30 EDT).

use bson::Bson;
use chrono::{LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone};
use vocabulary::location;

use super::value::{Value, bson_type_name, fail};
use crate::error::QueryError;

/// A time zone argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    /// Minutes east of UTC.
    Fixed(i32),
    Named(chrono_tz::Tz),
}

pub const UTC: Zone = Zone::Fixed(0);

impl Zone {
    /// A `timezone` operand; `Ok(None)` for null or missing (the operator then gives null).
    pub fn parse(value: &Value) -> Result<Option<Zone>, QueryError> {
        let text = match value {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(None),
            Some(Bson::String(s)) => s.as_str(),
            Some(other) => {
                return Err(fail(
                    location::TIMEZONE_NOT_STRING,
                    format!("timezone must evaluate to a string, found {}", bson_type_name(other)),
                ));
            }
        };
        if matches!(text, "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT" | "Zulu") {
            return Ok(Some(UTC));
        }
        if let Some((offset, "")) = super::date_format::read_offset(text) {
            return Ok(Some(Zone::Fixed(offset)));
        }
        match text.parse::<chrono_tz::Tz>() {
            Ok(named) => Ok(Some(Zone::Named(named))),
            Err(_) => {
                Err(fail(location::TIMEZONE_UNRECOGNIZED, format!("unrecognized time zone identifier: \"{text}\"")))
            }
        }
    }

    /// An optional `timezone` operand: UTC when not given, `Ok(None)` when given as null or
    /// missing (the operator then gives null).
    pub fn parse_or_utc(value: &Value) -> Result<Option<Zone>, QueryError> {
        match value {
            None => Ok(Some(UTC)),
            tz => Zone::parse(tz),
        }
    }

    /// Minutes east of UTC at the instant `millis`.
    pub fn offset_minutes_at(&self, millis: i64) -> i32 {
        match self {
            Zone::Fixed(minutes) => *minutes,
            Zone::Named(named) => match chrono::DateTime::from_timestamp_millis(millis) {
                Some(utc) => named.offset_from_utc_datetime(&utc.naive_utc()).fix().local_minus_utc() / 60,
                None => 0,
            },
        }
    }

    /// The local calendar time of the instant `millis`.
    pub fn local_time(&self, millis: i64) -> Result<NaiveDateTime, QueryError> {
        let utc = chrono::DateTime::from_timestamp_millis(millis).ok_or_else(out_of_range)?.naive_utc();
        let offset = TimeDelta::minutes(i64::from(self.offset_minutes_at(millis)));
        utc.checked_add_signed(offset).ok_or_else(out_of_range)
    }

    /// The instant of a local calendar time (see the module header for skipped and repeated
    /// local times).
    pub fn instant_of(&self, local: &NaiveDateTime) -> i64 {
        let as_if_utc = local.and_utc().timestamp_millis();
        let offset_minutes = match self {
            Zone::Fixed(minutes) => *minutes,
            Zone::Named(named) => match named.from_local_datetime(local) {
                LocalResult::Single(instant) | LocalResult::Ambiguous(instant, _) => {
                    return instant.timestamp_millis();
                }
                // Clock changes are months apart: a day earlier, the old offset was in force.
                LocalResult::None => self.offset_minutes_at(as_if_utc - 86_400_000),
            },
        };
        as_if_utc - i64::from(offset_minutes) * 60_000
    }
}

pub fn out_of_range() -> QueryError {
    fail(location::DATE_OUTSIDE_CALENDAR_RANGE, "date is outside the range the calendar functions support")
}
