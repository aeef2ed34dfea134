//! `$jsonSchema` (basic): MongoDB's draft-4 subset for validating documents.
//!
//! Supported keywords: `bsonType`, `type`, `required`, `properties`, `additionalProperties`
//! (boolean), `minimum`/`maximum` with `exclusiveMinimum`/`exclusiveMaximum`, `enum`,
//! `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`, `items` (one schema);
//! `title` and `description` are ignored. Any other keyword is a parse error, never silently
//! ignored. As in JSON Schema, a keyword only constrains values of the type it is about
//! (`minimum` passes strings), and `properties` only constrains fields that are present.

use std::cmp::Ordering;

use bson::{Bson, Document};
use document::compare_values;

use super::bson_type::BsonTypeSet;
use super::regex::FilterRegex;
use crate::error::{QueryError, Result};

/// A parsed schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    types: Option<BsonTypeSet>,
    required: Vec<String>,
    properties: Vec<(String, Schema)>,
    additional_properties: Option<bool>,
    minimum: Option<(Bson, bool)>,
    maximum: Option<(Bson, bool)>,
    allowed: Option<Vec<Bson>>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    pattern: Option<FilterRegex>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    items: Option<Box<Schema>>,
}

fn schema_error(message: impl Into<String>) -> QueryError {
    QueryError::FailedToParse(message.into())
}

impl Schema {
    pub fn parse(schema: &Document) -> Result<Schema> {
        let mut parsed = Schema::default();
        for (keyword, value) in schema {
            match keyword.as_str() {
                "bsonType" => parsed.types = Some(BsonTypeSet::parse(value)?),
                "type" => parsed.types = Some(json_types(value)?),
                "required" => parsed.required = string_list(keyword, value)?,
                "properties" => parsed.properties = properties(value)?,
                "additionalProperties" => match value {
                    Bson::Boolean(allowed) => parsed.additional_properties = Some(*allowed),
                    _ => return Err(schema_error("$jsonSchema keyword 'additionalProperties' must be a boolean")),
                },
                "minimum" => parsed.minimum = Some((number(keyword, value)?, false)),
                "maximum" => parsed.maximum = Some((number(keyword, value)?, false)),
                "exclusiveMinimum" | "exclusiveMaximum" => {}
                "enum" => match value {
                    Bson::Array(items) if !items.is_empty() => parsed.allowed = Some(items.clone()),
                    _ => return Err(schema_error("$jsonSchema keyword 'enum' must be a non-empty array")),
                },
                "minLength" => parsed.min_length = Some(count(keyword, value)?),
                "maxLength" => parsed.max_length = Some(count(keyword, value)?),
                "minItems" => parsed.min_items = Some(count(keyword, value)?),
                "maxItems" => parsed.max_items = Some(count(keyword, value)?),
                "pattern" => match value {
                    Bson::String(pattern) => parsed.pattern = Some(FilterRegex::new(pattern, "")?),
                    _ => return Err(schema_error("$jsonSchema keyword 'pattern' must be a string")),
                },
                "items" => match value {
                    Bson::Document(inner) => parsed.items = Some(Box::new(Schema::parse(inner)?)),
                    _ => return Err(schema_error("$jsonSchema keyword 'items' must be an object")),
                },
                "title" | "description" => {}
                other => return Err(schema_error(format!("Unknown $jsonSchema keyword: {other}"))),
            }
        }
        let exclusive = |name: &str| matches!(schema.get(name), Some(Bson::Boolean(true)));
        if let Some((_, flag)) = parsed.minimum.as_mut() {
            *flag = exclusive("exclusiveMinimum");
        }
        if let Some((_, flag)) = parsed.maximum.as_mut() {
            *flag = exclusive("exclusiveMaximum");
        }
        Ok(parsed)
    }

    /// Whether a top-level document satisfies the schema.
    pub fn matches(&self, document: &Document) -> bool {
        self.matches_document(document)
            && self.types.as_ref().is_none_or(|t| t.contains(&Bson::Document(Document::new())))
    }

    fn matches_document(&self, document: &Document) -> bool {
        if !self.required.iter().all(|field| document.contains_key(field)) {
            return false;
        }
        for (name, schema) in &self.properties {
            if let Some(value) = document.get(name)
                && !schema.matches_value(value)
            {
                return false;
            }
        }
        if self.additional_properties == Some(false) {
            return document.keys().all(|key| self.properties.iter().any(|(name, _)| name == key));
        }
        true
    }

    fn matches_value(&self, value: &Bson) -> bool {
        if self.types.as_ref().is_some_and(|types| !types.contains(value)) {
            return false;
        }
        if self
            .allowed
            .as_ref()
            .is_some_and(|allowed| !allowed.iter().any(|a| compare_values(a, value) == Ordering::Equal))
        {
            return false;
        }
        match value {
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => self.matches_number(value),
            Bson::String(text) => {
                let length = text.chars().count();
                self.min_length.is_none_or(|min| length >= min)
                    && self.max_length.is_none_or(|max| length <= max)
                    && self.pattern.as_ref().is_none_or(|pattern| pattern.is_match(text))
            }
            Bson::Array(items) => {
                self.min_items.is_none_or(|min| items.len() >= min)
                    && self.max_items.is_none_or(|max| items.len() <= max)
                    && self.items.as_ref().is_none_or(|schema| items.iter().all(|item| schema.matches_value(item)))
            }
            Bson::Document(document) => self.matches_document(document),
            _ => true,
        }
    }

    fn matches_number(&self, value: &Bson) -> bool {
        let above = self.minimum.as_ref().is_none_or(|(minimum, exclusive)| {
            let order = compare_values(value, minimum);
            order == Ordering::Greater || (!exclusive && order == Ordering::Equal)
        });
        let below = self.maximum.as_ref().is_none_or(|(maximum, exclusive)| {
            let order = compare_values(value, maximum);
            order == Ordering::Less || (!exclusive && order == Ordering::Equal)
        });
        above && below
    }
}

/// JSON Schema `type` names mapped to BSON types (`number` is every numeric type).
fn json_types(value: &Bson) -> Result<BsonTypeSet> {
    let names: Vec<&str> = match value {
        Bson::String(name) => vec![name.as_str()],
        Bson::Array(items) => items.iter().filter_map(Bson::as_str).collect(),
        _ => return Err(schema_error("$jsonSchema keyword 'type' must be a string or an array of strings")),
    };
    let mut bson_names = Vec::new();
    for name in names {
        let mapped = match name {
            "object" => "object",
            "array" => "array",
            "number" => "number",
            "string" => "string",
            "boolean" => "bool",
            "null" => "null",
            other => return Err(schema_error(format!("Unknown type name alias: {other}"))),
        };
        bson_names.push(Bson::String(mapped.to_string()));
    }
    BsonTypeSet::parse(&Bson::Array(bson_names))
}

fn string_list(keyword: &str, value: &Bson) -> Result<Vec<String>> {
    match value {
        Bson::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| schema_error(format!("$jsonSchema keyword '{keyword}' must be an array of strings"))),
        _ => Err(schema_error(format!("$jsonSchema keyword '{keyword}' must be an array"))),
    }
}

fn properties(value: &Bson) -> Result<Vec<(String, Schema)>> {
    let Bson::Document(fields) = value else {
        return Err(schema_error("$jsonSchema keyword 'properties' must be an object"));
    };
    fields
        .iter()
        .map(|(name, schema)| match schema {
            Bson::Document(inner) => Ok((name.clone(), Schema::parse(inner)?)),
            _ => Err(schema_error(format!("Nested schema for $jsonSchema property '{name}' must be an object"))),
        })
        .collect()
}

fn number(keyword: &str, value: &Bson) -> Result<Bson> {
    match value {
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => Ok(value.clone()),
        _ => Err(schema_error(format!("$jsonSchema keyword '{keyword}' must be a number"))),
    }
}

fn count(keyword: &str, value: &Bson) -> Result<usize> {
    match value {
        Bson::Int32(i) if *i >= 0 => Ok(*i as usize),
        Bson::Int64(i) if *i >= 0 => Ok(*i as usize),
        Bson::Double(d) if *d >= 0.0 && d.fract() == 0.0 => Ok(*d as usize),
        _ => Err(schema_error(format!("$jsonSchema keyword '{keyword}' must be a non-negative integer"))),
    }
}
