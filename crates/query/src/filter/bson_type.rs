//! `$type` operands: BSON type names, aliases and numbers.
//!
//! A [`BsonTypeSet`] is a set of BSON type numbers (1 double … 19 decimal, -1 minKey,
//! 127 maxKey) plus the `"number"` alias; it tests a single value's type.

use bson::Bson;

use crate::error::{QueryError, Result};

/// The types a `$type` predicate accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BsonTypeSet {
    codes: Vec<i32>,
    any_number: bool,
}

const NAMES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

/// The BSON type number of a value.
pub fn type_code(value: &Bson) -> i32 {
    i32::from(value.element_type() as u8 as i8)
}

/// The `$type` name of a value (`"int"`, `"objectId"`, ...).
pub fn type_name(value: &Bson) -> &'static str {
    let code = type_code(value);
    NAMES.iter().find(|(_, c)| *c == code).map_or("unknown", |(name, _)| name)
}

impl BsonTypeSet {
    /// Parses a `$type` operand: one name or number, or an array of them.
    pub fn parse(operand: &Bson) -> Result<BsonTypeSet> {
        let mut set = BsonTypeSet { codes: Vec::new(), any_number: false };
        match operand {
            Bson::Array(items) => {
                for item in items {
                    set.add(item)?;
                }
            }
            single => set.add(single)?,
        }
        Ok(set)
    }

    fn add(&mut self, item: &Bson) -> Result<()> {
        match item {
            Bson::String(name) if name == "number" => self.any_number = true,
            Bson::String(name) => {
                let code = NAMES
                    .iter()
                    .find(|(alias, _)| alias == name)
                    .map(|(_, code)| *code)
                    .ok_or_else(|| QueryError::bad_value(format!("Unknown type name alias: {name}")))?;
                self.codes.push(code);
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                let code = integral(item)
                    .filter(|code| NAMES.iter().any(|(_, known)| i64::from(*known) == *code))
                    .ok_or_else(|| QueryError::bad_value(format!("Invalid numerical type code: {item}")))?;
                self.codes.push(code as i32);
            }
            other => {
                return Err(QueryError::bad_value(format!(
                    "type must be represented as a number or a string, not {other}"
                )));
            }
        }
        Ok(())
    }

    /// Whether one value (not traversed) has one of the types.
    pub fn contains(&self, value: &Bson) -> bool {
        let number = matches!(value, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_));
        (self.any_number && number) || self.codes.contains(&type_code(value))
    }
}

/// The integer an integral number holds.
fn integral(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e18 => Some(*d as i64),
        Bson::Decimal128(d) => d.to_string().parse::<f64>().ok().filter(|f| f.fract() == 0.0).map(|f| f as i64),
        _ => None,
    }
}
