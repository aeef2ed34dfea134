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

/// The BSON type number of a value.
pub fn type_code(value: &Bson) -> i32 {
    i32::from(value.element_type() as u8 as i8)
}

/// The `$type` name of a value (`"int"`, `"objectId"`, ...).
pub fn type_name(value: &Bson) -> &'static str {
    vocabulary::type_name(type_code(value)).unwrap_or("unknown")
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
                let code = vocabulary::type_number(name)
                    .ok_or_else(|| QueryError::bad_value(format!("Unknown type name alias: {name}")))?;
                self.codes.push(code);
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
                let code = integral(item)
                    .filter(|code| i32::try_from(*code).ok().and_then(vocabulary::type_name).is_some())
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
