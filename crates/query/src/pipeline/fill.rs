//! `$fill`: fills null and missing fields, as MongoDB defines it, by rewriting into the stages
//! it stands for: `{method: "locf" | "linear"}` outputs become one `$setWindowFields` (`$locf`,
//! `$linearFill` of the field itself, with the stage's `sortBy` and `partitionBy` or
//! `partitionByFields`), `{value: <expr>}` outputs one `$addFields` of `{$ifNull: ["$field",
//! expr]}` after it.

use bson::{Bson, Document, doc};
use vocabulary::location;

use super::add_fields::AddFields;
use super::window::SetWindowFields;
use super::{Context, DocumentStream};
use crate::error::{ErrorCode, QueryError, idl};
use crate::expr::{bson_type_name, fail};

#[derive(Debug, Clone)]
pub struct FillSpec {
    window: Option<SetWindowFields>,
    add_fields: Option<AddFields>,
}

impl FillSpec {
    pub fn parse(spec: &Bson) -> Result<FillSpec, QueryError> {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                ErrorCode::FailedToParse,
                format!("The $fill stage specification must be an object, found {}", bson_type_name(spec)),
            ));
        };
        let mut window = Document::new();
        let mut output = None;
        let mut partition_by_fields = None;
        for (key, value) in spec {
            match (key.as_str(), value) {
                ("sortBy", Bson::Document(_)) => {
                    window.insert("sortBy", value.clone());
                }
                ("partitionBy", Bson::String(_) | Bson::Document(_)) => {
                    window.insert("partitionBy", value.clone());
                }
                ("partitionByFields", Bson::Array(fields)) => partition_by_fields = Some(fields),
                ("output", Bson::Document(fields)) => output = Some(fields),
                ("sortBy" | "output", other) => return Err(wrong_type(key, other, "object")),
                ("partitionBy", other) => return Err(wrong_type(key, other, "string or object")),
                ("partitionByFields", other) => return Err(wrong_type(key, other, "array")),
                (other, _) => return Err(idl::unknown_field(&format!("$fill.{other}"))),
            }
        }
        let output = output.ok_or_else(|| idl::missing_field("$fill.output"))?;
        if output.is_empty() {
            return Err(fail(
                location::FILL_OUTPUT_EMPTY,
                "The output field in '$fill' must contain an object with at least one element",
            ));
        }
        if let Some(fields) = partition_by_fields {
            if window.contains_key("partitionBy") {
                return Err(fail(
                    location::FILL_PARTITION_BY_AND_PARTITION_BY_FIELDS,
                    "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'",
                ));
            }
            let mut partition = Document::new();
            for field in fields {
                let Bson::String(name) = field else { return Err(wrong_type("partitionByFields", field, "string")) };
                partition.insert(name.clone(), format!("${name}"));
            }
            window.insert("partitionBy", partition);
        }
        let (methods, values) = parse_outputs(output)?;
        let window = if methods.is_empty() {
            None
        } else {
            window.insert("output", methods);
            Some(SetWindowFields::parse(&Bson::Document(window))?)
        };
        let add_fields = if values.is_empty() { None } else { Some(AddFields::parse(&values)?) };
        Ok(FillSpec { window, add_fields })
    }

    pub(super) fn stream<'a>(&self, input: DocumentStream<'a>, context: &Context<'a>) -> DocumentStream<'a> {
        let mut stream = input;
        if let Some(window) = &self.window {
            stream = window.stream(stream, context);
        }
        if let Some(add_fields) = &self.add_fields {
            let (add_fields, vars) = (add_fields.clone(), context.vars.clone());
            stream = super::map_each(stream, move |d| add_fields.apply(&d, &vars));
        }
        stream
    }
}

/// The `$setWindowFields` outputs of the methods and the `$addFields` of the values.
fn parse_outputs(output: &Document) -> Result<(Document, Document), QueryError> {
    let (mut methods, mut values) = (Document::new(), Document::new());
    for (field, spec) in output {
        let Bson::Document(spec) = spec else {
            return Err(fail(
                location::FILL_OUTPUT_NOT_ONE_FIELD,
                "Each fill output specification must be an object with exactly one field",
            ));
        };
        let (mut method, mut value) = (None, None);
        for (key, v) in spec {
            match key.as_str() {
                "method" => method = Some(v),
                "value" => value = Some(v),
                other => return Err(idl::unknown_field(&format!("$fill.output.{other}"))),
            }
        }
        match (method, value) {
            (Some(_), Some(_)) => {
                return Err(fail(
                    location::FILL_OUTPUT_METHOD_AND_VALUE,
                    "Each fill output specification must have exactly one of 'method' or 'value' fields, not both",
                ));
            }
            (Some(Bson::String(m)), None) if m == "locf" => {
                methods.insert(field.clone(), doc! {"$locf": format!("${field}")});
            }
            (Some(Bson::String(m)), None) if m == "linear" => {
                methods.insert(field.clone(), doc! {"$linearFill": format!("${field}")});
            }
            (Some(Bson::String(_)), None) => {
                return Err(fail(location::FILL_METHOD_INVALID, "Method must be either locf or linear"));
            }
            (Some(other), None) => return Err(wrong_type("output.method", other, "string")),
            (None, Some(v)) => {
                values.insert(field.clone(), doc! {"$ifNull": [format!("${field}"), v.clone()]});
            }
            (None, None) => {
                return Err(fail(
                    location::FILL_OUTPUT_METHOD_AND_VALUE,
                    "Each fill output specification must have exactly one of 'method' or 'value' fields, not both",
                ));
            }
        }
    }
    Ok((methods, values))
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> QueryError {
    idl::wrong_type(&format!("$fill.{field}"), value, expected)
}
