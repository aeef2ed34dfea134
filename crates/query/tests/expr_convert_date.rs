//! Goal: type conversion and date operators follow the manual's tables (values, types,
//! ConversionFailure 241, onError/onNull) and date arithmetic in UTC, fixed offsets and Olson
//! zones.
//! Method: table tests against a document holding one known instant.

use std::str::FromStr;

use bson::oid::ObjectId;
use bson::{Bson, DateTime, Decimal128, doc};
use query::expr::{Expr, Variables, evaluate};

/// 2014-01-01T08:15:39.736Z, a Wednesday (the manual's `$dateToString` example).
const INSTANT: i64 = 1_388_564_139_736;

fn eval(expr: Bson) -> Result<Bson, i32> {
    let document = doc! {"date": DateTime::from_millis(INSTANT), "s": "42", "n": Bson::Null};
    let parsed = Expr::parse(&expr).map_err(|e| e.code())?;
    evaluate(&parsed, &document, &Variables::new()).map_err(|e| e.code())
}

fn check(cases: Vec<(Bson, Result<Bson, i32>)>) {
    for (expr, expected) in cases {
        assert_eq!(eval(expr.clone()), expected, "expression {expr}");
    }
}

fn s(text: &str) -> Bson {
    Bson::String(text.to_string())
}

fn dec(text: &str) -> Bson {
    Bson::Decimal128(Decimal128::from_str(text).unwrap_or_else(|e| panic!("bad decimal {text}: {e}")))
}

fn date(millis: i64) -> Bson {
    Bson::DateTime(DateTime::from_millis(millis))
}

#[test]
fn type_and_is_number() {
    check(vec![
        (bson::bson!({"$type": "$missing"}), Ok(s("missing"))),
        (bson::bson!({"$type": "$n"}), Ok(s("null"))),
        (bson::bson!({"$type": [[1]]}), Ok(s("array"))),
        (bson::bson!({"$type": 1_i64}), Ok(s("long"))),
        (bson::bson!({"$type": dec("1")}), Ok(s("decimal"))),
        (bson::bson!({"$type": "$date"}), Ok(s("date"))),
        (bson::bson!({"$isNumber": 1.5}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$isNumber": "1"}), Ok(Bson::Boolean(false))),
    ]);
}

#[test]
fn shorthand_conversions() {
    check(vec![
        (bson::bson!({"$toString": true}), Ok(s("true"))),
        (bson::bson!({"$toString": 2.5}), Ok(s("2.5"))),
        (bson::bson!({"$toString": 1000_i64}), Ok(s("1000"))),
        (bson::bson!({"$toString": "$date"}), Ok(s("2014-01-01T08:15:39.736Z"))),
        (bson::bson!({"$toString": "$missing"}), Ok(Bson::Null)),
        (bson::bson!({"$toString": [[1]]}), Err(241)),
        (bson::bson!({"$toInt": 2.9}), Ok(Bson::Int32(2))),
        (bson::bson!({"$toInt": -2.9}), Ok(Bson::Int32(-2))),
        (bson::bson!({"$toInt": "$s"}), Ok(Bson::Int32(42))),
        (bson::bson!({"$toInt": "5.5"}), Err(241)),
        (bson::bson!({"$toInt": 3_000_000_000_i64}), Err(241)),
        (bson::bson!({"$toInt": true}), Ok(Bson::Int32(1))),
        (bson::bson!({"$toLong": "$date"}), Ok(Bson::Int64(INSTANT))),
        (bson::bson!({"$toLong": dec("-5.5")}), Ok(Bson::Int64(-5))),
        (bson::bson!({"$toDouble": "-5.5"}), Ok(Bson::Double(-5.5))),
        (bson::bson!({"$toDouble": "0x6400"}), Err(241)),
        (bson::bson!({"$toDouble": false}), Ok(Bson::Double(0.0))),
        (bson::bson!({"$toDecimal": 2.5}), Ok(dec("2.50000000000000"))),
        (bson::bson!({"$toDecimal": 5}), Ok(dec("5"))),
        (bson::bson!({"$toDecimal": "1.5"}), Ok(dec("1.5"))),
        (bson::bson!({"$toBool": 0}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$toBool": ""}), Ok(Bson::Boolean(true))),
        (bson::bson!({"$toBool": dec("0")}), Ok(Bson::Boolean(false))),
        (bson::bson!({"$toDate": 1_388_564_139_736_i64}), Ok(date(INSTANT))),
        (bson::bson!({"$toDate": "2014-01-01T08:15:39.736Z"}), Ok(date(INSTANT))),
        (bson::bson!({"$toDate": "2018-03-20"}), Ok(date(1_521_504_000_000))),
        (bson::bson!({"$toDate": "2018-03-20 11:00:06 +0500"}), Ok(date(1_521_525_606_000))),
        (bson::bson!({"$toDate": 5}), Err(241)),
        (
            bson::bson!({"$toObjectId": "5ab9cbfa31c2ab715d42129e"}),
            Ok(Bson::ObjectId(ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap_or_else(|_| ObjectId::new()))),
        ),
        (bson::bson!({"$toObjectId": "xyz"}), Err(241)),
    ]);
}

#[test]
fn convert_with_on_error_and_on_null() {
    check(vec![
        (bson::bson!({"$convert": {"input": "abc", "to": "int", "onError": "bad"}}), Ok(s("bad"))),
        (bson::bson!({"$convert": {"input": "abc", "to": "int"}}), Err(241)),
        (bson::bson!({"$convert": {"input": "$missing", "to": "int", "onNull": 0}}), Ok(Bson::Int32(0))),
        (bson::bson!({"$convert": {"input": "$missing", "to": "int"}}), Ok(Bson::Null)),
        (bson::bson!({"$convert": {"input": "7", "to": 16}}), Ok(Bson::Int32(7))),
        (bson::bson!({"$convert": {"input": 7, "to": "string"}}), Ok(s("7"))),
        (bson::bson!({"$convert": {"input": 7, "to": "nope"}}), Err(2)),
        (bson::bson!({"$convert": {"input": 7}}), Err(9)),
        (bson::bson!({"$convert": {"input": 7, "to": "int", "extra": 1}}), Err(9)),
    ]);
}

#[test]
fn double_to_string_uses_six_significant_digits() {
    check(vec![
        (bson::bson!({"$toString": 1234567.891}), Ok(s("1.23457e+06"))),
        (bson::bson!({"$toString": 0.0001}), Ok(s("0.0001"))),
        (bson::bson!({"$toString": 0.00001}), Ok(s("1e-05"))),
        (bson::bson!({"$toString": 3.0}), Ok(s("3"))),
        (bson::bson!({"$toString": -0.5}), Ok(s("-0.5"))),
    ]);
}

#[test]
fn date_parts_in_utc_and_offsets() {
    check(vec![
        (bson::bson!({"$year": "$date"}), Ok(Bson::Int32(2014))),
        (bson::bson!({"$month": "$date"}), Ok(Bson::Int32(1))),
        (bson::bson!({"$dayOfMonth": "$date"}), Ok(Bson::Int32(1))),
        (bson::bson!({"$hour": "$date"}), Ok(Bson::Int32(8))),
        (bson::bson!({"$minute": "$date"}), Ok(Bson::Int32(15))),
        (bson::bson!({"$second": "$date"}), Ok(Bson::Int32(39))),
        (bson::bson!({"$millisecond": "$date"}), Ok(Bson::Int32(736))),
        (bson::bson!({"$dayOfYear": "$date"}), Ok(Bson::Int32(1))),
        (bson::bson!({"$dayOfWeek": "$date"}), Ok(Bson::Int32(4))),
        (bson::bson!({"$week": "$date"}), Ok(Bson::Int32(0))),
        (bson::bson!({"$isoWeek": "$date"}), Ok(Bson::Int32(1))),
        (bson::bson!({"$isoDayOfWeek": "$date"}), Ok(Bson::Int32(3))),
        (bson::bson!({"$isoWeekYear": "$date"}), Ok(Bson::Int64(2014))),
        (bson::bson!({"$hour": {"date": "$date", "timezone": "+05:30"}}), Ok(Bson::Int32(13))),
        (bson::bson!({"$hour": {"date": "$date", "timezone": "-0900"}}), Ok(Bson::Int32(23))),
        (bson::bson!({"$year": {"date": "$date", "timezone": "-0900"}}), Ok(Bson::Int32(2013))),
        (bson::bson!({"$hour": {"date": "$date", "timezone": "Mars/Olympus"}}), Err(40485)),
        (bson::bson!({"$year": "$missing"}), Ok(Bson::Null)),
        (bson::bson!({"$year": "2014"}), Err(16006)),
        (
            bson::bson!({"$year": Bson::ObjectId(ObjectId::parse_str("5ab9cbfa31c2ab715d42129e").unwrap_or_else(|_| ObjectId::new()))}),
            Ok(Bson::Int32(2018)),
        ),
    ]);
}

#[test]
fn date_to_string_and_from_string() {
    check(vec![
        (bson::bson!({"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}}), Ok(s("2014-01-01"))),
        (
            bson::bson!({"$dateToString": {"format": "%H:%M:%S:%L%z", "date": "$date", "timezone": "+04:30"}}),
            Ok(s("12:45:39:736+0430")),
        ),
        (bson::bson!({"$dateToString": {"format": "%Z", "date": "$date", "timezone": "-01:00"}}), Ok(s("-60"))),
        (
            bson::bson!({"$dateToString": {"format": "%j %w %u %U %V %G %%", "date": "$date"}}),
            Ok(s("001 4 3 00 01 2014 %")),
        ),
        (bson::bson!({"$dateToString": {"date": "$date"}}), Ok(s("2014-01-01T08:15:39.736Z"))),
        (bson::bson!({"$dateToString": {"date": "$missing", "onNull": "none"}}), Ok(s("none"))),
        (bson::bson!({"$dateToString": {"date": "$missing"}}), Ok(Bson::Null)),
        (bson::bson!({"$dateToString": {"format": "%Q", "date": "$date"}}), Err(18536)),
        (bson::bson!({"$dateToString": {"format": "%", "date": "$date"}}), Err(18535)),
        (bson::bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787"}}), Ok(date(1_486_555_840_787))),
        (
            bson::bson!({"$dateFromString": {"dateString": "2017-02-08T12:10:40.787", "timezone": "+01:00"}}),
            Ok(date(1_486_552_240_787)),
        ),
        (
            bson::bson!({"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}),
            Ok(date(1_529_020_800_000)),
        ),
        (bson::bson!({"$dateFromString": {"dateString": "not a date"}}), Err(241)),
        (bson::bson!({"$dateFromString": {"dateString": "not a date", "onError": "oops"}}), Ok(s("oops"))),
        (bson::bson!({"$dateFromString": {"dateString": null, "onNull": "nothing"}}), Ok(s("nothing"))),
        (bson::bson!({"$dateFromString": {"dateString": 5, "onError": "oops"}}), Ok(s("oops"))),
    ]);
}

#[test]
fn date_arithmetic() {
    let jan31 = 1_706_659_200_000; // 2024-01-31T00:00:00Z
    let feb29 = 1_709_164_800_000; // 2024-02-29T00:00:00Z
    check(vec![
        (bson::bson!({"$dateAdd": {"startDate": date(jan31), "unit": "month", "amount": 1}}), Ok(date(feb29))),
        (
            bson::bson!({"$dateAdd": {"startDate": date(jan31), "unit": "day", "amount": 2}}),
            Ok(date(jan31 + 2 * 86_400_000)),
        ),
        (
            bson::bson!({"$dateSubtract": {"startDate": date(feb29), "unit": "hour", "amount": 24}}),
            Ok(date(feb29 - 86_400_000)),
        ),
        (
            bson::bson!({"$dateAdd": {"startDate": date(jan31), "unit": "year", "amount": 1}}),
            Ok(date(1_738_281_600_000)),
        ),
        (bson::bson!({"$dateAdd": {"startDate": date(jan31), "unit": "day", "amount": 1.5}}), Err(5166405)),
        (bson::bson!({"$dateAdd": {"startDate": date(jan31), "unit": "fortnight", "amount": 1}}), Err(9)),
        (bson::bson!({"$dateAdd": {"startDate": "$missing", "unit": "day", "amount": 1}}), Ok(Bson::Null)),
        (
            bson::bson!({"$dateDiff": {"startDate": date(jan31), "endDate": date(feb29), "unit": "day"}}),
            Ok(Bson::Int64(29)),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": date(jan31), "endDate": date(feb29), "unit": "month"}}),
            Ok(Bson::Int64(1)),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": date(feb29), "endDate": date(jan31), "unit": "week"}}),
            Ok(Bson::Int64(-4)),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": date(jan31), "endDate": date(feb29), "unit": "year"}}),
            Ok(Bson::Int64(0)),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": date(jan31 - 1), "endDate": date(jan31), "unit": "millisecond"}}),
            Ok(Bson::Int64(1)),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": date(jan31 - 1), "endDate": date(jan31), "unit": "second"}}),
            Ok(Bson::Int64(1)),
        ),
        (bson::bson!({"$dateTrunc": {"date": "$date", "unit": "day"}}), Ok(date(1_388_534_400_000))),
        (bson::bson!({"$dateTrunc": {"date": "$date", "unit": "hour", "binSize": 6}}), Ok(date(1_388_556_000_000))),
        (bson::bson!({"$dateTrunc": {"date": "$date", "unit": "month"}}), Ok(date(1_388_534_400_000))),
        (bson::bson!({"$dateTrunc": {"date": date(feb29), "unit": "quarter"}}), Ok(date(1_704_067_200_000))),
        (
            bson::bson!({"$dateTrunc": {"date": date(feb29), "unit": "week", "startOfWeek": "monday"}}),
            Ok(date(1_708_905_600_000)),
        ),
        (bson::bson!({"$dateTrunc": {"date": "$date", "unit": "day", "binSize": 0}}), Err(5439017)),
    ]);
}

fn utc(text: &str) -> Bson {
    Bson::DateTime(DateTime::parse_rfc3339_str(text).unwrap_or_else(|e| panic!("{text}: {e}")))
}

/// Goal: Olson time zones, with their daylight saving time, in every date operator: the
/// offset of the instant, calendar days of 23 and 25 hours, and the local times a clock change
/// skips (read past the gap) or repeats (the earlier instant).
#[test]
fn olson_time_zones_follow_daylight_saving_time() {
    let ny = "America/New_York";
    check(vec![
        (bson::bson!({"$hour": {"date": utc("2024-07-01T12:00:00Z"), "timezone": ny}}), Ok(Bson::Int32(8))),
        (bson::bson!({"$hour": {"date": utc("2024-01-15T12:00:00Z"), "timezone": ny}}), Ok(Bson::Int32(7))),
        (
            bson::bson!({"$dateToString": {"format": "%Y-%m-%d %H:%M %z", "date": utc("2024-07-01T12:00:00Z"), "timezone": "Europe/Berlin"}}),
            Ok(s("2024-07-01 14:00 +0200")),
        ),
        (
            bson::bson!({"$dateToString": {"format": "%H:%M %z", "date": utc("2024-12-01T12:00:00Z"), "timezone": "Europe/Berlin"}}),
            Ok(s("13:00 +0100")),
        ),
        // The day clocks spring forward in New York is 23 hours long.
        (
            bson::bson!({"$dateTrunc": {"date": utc("2024-03-10T20:00:00Z"), "unit": "day", "timezone": ny}}),
            Ok(utc("2024-03-10T05:00:00Z")),
        ),
        (
            bson::bson!({"$dateAdd": {"startDate": utc("2024-03-09T17:00:00Z"), "unit": "day", "amount": 1, "timezone": ny}}),
            Ok(utc("2024-03-10T16:00:00Z")),
        ),
        (
            bson::bson!({"$dateAdd": {"startDate": utc("2024-03-09T17:00:00Z"), "unit": "hour", "amount": 24, "timezone": ny}}),
            Ok(utc("2024-03-10T17:00:00Z")),
        ),
        (
            bson::bson!({"$dateDiff": {"startDate": utc("2024-03-10T04:59:00Z"), "endDate": utc("2024-03-10T05:00:00Z"), "unit": "day", "timezone": ny}}),
            Ok(Bson::Int64(1)),
        ),
        // 02:30 does not exist that day (read as 03:30 EDT); 01:30 on fall-back day happens twice.
        (
            bson::bson!({"$dateFromString": {"dateString": "2024-03-10T02:30:00", "timezone": ny}}),
            Ok(utc("2024-03-10T07:30:00Z")),
        ),
        (
            bson::bson!({"$dateFromString": {"dateString": "2024-11-03T01:30:00", "timezone": ny}}),
            Ok(utc("2024-11-03T05:30:00Z")),
        ),
        (bson::bson!({"$hour": {"date": "$date", "timezone": "Asia/Kolkata"}}), Ok(Bson::Int32(13))),
        (bson::bson!({"$hour": {"date": "$date", "timezone": "America/Atlantis"}}), Err(40485)),
    ]);
}

/// Goal: `$dateFromParts` and `$dateToParts` as MongoDB gives them: carrying fields, ISO week
/// dates, time zones, null for a null part, and its errors.
#[test]
fn date_from_and_to_parts() {
    check(vec![
        (
            bson::bson!({"$dateFromParts": {"year": 2017, "month": 2, "day": 8, "hour": 12}}),
            Ok(utc("2017-02-08T12:00:00Z")),
        ),
        (bson::bson!({"$dateFromParts": {"year": 2017, "month": 14, "day": 0}}), Ok(utc("2018-01-31T00:00:00Z"))),
        (bson::bson!({"$dateFromParts": {"year": 2017, "hour": -1}}), Ok(utc("2016-12-31T23:00:00Z"))),
        (
            bson::bson!({"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 6, "isoDayOfWeek": 3}}),
            Ok(utc("2017-02-08T00:00:00Z")),
        ),
        (
            bson::bson!({"$dateFromParts": {"year": 2024, "month": 7, "day": 1, "hour": 8, "timezone": "America/New_York"}}),
            Ok(utc("2024-07-01T12:00:00Z")),
        ),
        (bson::bson!({"$dateFromParts": {"year": 2017, "month": "$missing"}}), Ok(Bson::Null)),
        (bson::bson!({"$dateFromParts": {"year": 2017, "isoWeek": 1}}), Err(40489)),
        (bson::bson!({"$dateFromParts": {"month": 1}}), Err(40516)),
        (bson::bson!({"$dateFromParts": {"year": 0}}), Err(40523)),
        (bson::bson!({"$dateFromParts": {"year": 2017, "month": 40000}}), Err(31034)),
        (bson::bson!({"$dateFromParts": {"year": 2017.5}}), Err(40515)),
        (bson::bson!({"$dateFromParts": {"year": 2017, "days": 1}}), Err(40518)),
        (
            bson::bson!({"$dateToParts": {"date": "$date"}}),
            Ok(Bson::Document(
                doc! {"year": 2014, "month": 1, "day": 1, "hour": 8, "minute": 15, "second": 39, "millisecond": 736},
            )),
        ),
        (
            bson::bson!({"$dateToParts": {"date": "$date", "timezone": "America/New_York", "iso8601": true}}),
            Ok(Bson::Document(
                doc! {"isoWeekYear": 2014, "isoWeek": 1, "isoDayOfWeek": 3, "hour": 3, "minute": 15, "second": 39, "millisecond": 736},
            )),
        ),
        (bson::bson!({"$dateToParts": {"date": "$missing"}}), Ok(Bson::Null)),
        (bson::bson!({"$dateToParts": {"date": "$date", "iso8601": 1}}), Err(40521)),
    ]);
}
