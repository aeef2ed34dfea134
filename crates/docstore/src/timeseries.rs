//! Time-series collections: `create` with `timeseries: {timeField, metaField?, granularity? |
//! bucketMaxSpanSeconds + bucketRoundingSeconds}` and an optional `expireAfterSeconds`.
//!
//! What a user of MongoDB's time-series collections relies on holds: the options are checked
//! and reported as MongoDB reports them (listCollections type `timeseries`, the granularity's
//! bucket span filled in), every document must carry its `timeField` as a date, old
//! measurements expire by their `timeField` when `expireAfterSeconds` is set (the TTL monitor,
//! `index::ttl`), and with a `metaField` the collection gets MongoDB's default index on
//! `{<metaField>: 1, <timeField>: 1}`.
//!
//! Known difference: documents are stored as in any collection, not in MongoDB's compressed
//! buckets, so `_id` stays unique (MongoDB's time-series collections accept duplicate `_id`s)
//! and there is no `system.buckets` collection.

use bson::{Bson, Document, RawDocument, doc};
use query::error::idl;

use crate::error::{Error, Result};

/// A time-series collection's fields and expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    pub time_field: String,
    pub meta_field: Option<String>,
    pub expire_after_seconds: Option<i64>,
}

impl TimeSeries {
    /// The collection's time-series settings (`None`: not one); MongoDB's errors for bad
    /// options, including `expireAfterSeconds` on another kind of collection.
    pub fn from_options(options: &Document) -> Result<Option<TimeSeries>> {
        let expire_after_seconds = match options.get("expireAfterSeconds") {
            None => None,
            Some(value) => Some(expire_seconds(value)?),
        };
        let Some(spec) = options.get("timeseries") else {
            if expire_after_seconds.is_some() && !options.contains_key("clusteredIndex") {
                return Err(Error::InvalidOptions(
                    "'expireAfterSeconds' is only supported on time-series and clustered collections".into(),
                ));
            }
            return Ok(None);
        };
        let Bson::Document(spec) = spec else {
            return Err(Error::TypeMismatch("'timeseries' must be an object".into()));
        };
        if options.get_bool("capped").unwrap_or(false) {
            return Err(Error::InvalidOptions("Time-series collections cannot be capped".into()));
        }
        let field = |name: &str| match spec.get(name) {
            None => Ok(None),
            Some(Bson::String(value)) if !value.is_empty() && !value.starts_with('$') => Ok(Some(value.clone())),
            Some(Bson::String(_)) => Err(Error::bad_value(format!("The '{name}' must be a non-empty field name"))),
            Some(_) => Err(Error::TypeMismatch(format!("BSON field 'timeseries.{name}' must be a string"))),
        };
        let time_field = field("timeField")?.ok_or_else(|| Error::Query(idl::missing_field("timeseries.timeField")))?;
        let meta_field = field("metaField")?;
        if meta_field.as_deref() == Some(time_field.as_str()) {
            return Err(Error::InvalidOptions("The 'metaField' cannot be the same as the 'timeField'".into()));
        }
        if meta_field.as_deref().is_some_and(|meta| meta.contains('.')) || time_field.contains('.') {
            return Err(Error::InvalidOptions("The 'timeField' and 'metaField' must be top-level field names".into()));
        }
        check_bucketing(spec)?;
        Ok(Some(TimeSeries { time_field, meta_field, expire_after_seconds }))
    }

    /// The `timeseries` option as MongoDB reports it: the granularity (`seconds` by default)
    /// and its bucket span filled in.
    pub fn normalized(options: &Document) -> Document {
        let Ok(spec) = options.get_document("timeseries") else { return options.clone() };
        let mut spec = spec.clone();
        if !spec.contains_key("bucketMaxSpanSeconds") {
            let granularity = spec.get_str("granularity").unwrap_or("seconds").to_owned();
            let span = match granularity.as_str() {
                "minutes" => 86_400,
                "hours" => 2_592_000,
                _ => 3_600,
            };
            spec.insert("granularity", granularity);
            spec.insert("bucketMaxSpanSeconds", span);
        }
        let mut normalized = options.clone();
        normalized.insert("timeseries", spec);
        normalized
    }

    /// A measurement must carry its time as a date.
    pub fn check(&self, raw: &RawDocument) -> Result<()> {
        match raw.get(&self.time_field) {
            Ok(Some(bson::RawBsonRef::DateTime(_))) => Ok(()),
            _ => Err(Error::bad_value(format!(
                "'{}' must be present and contain a valid BSON UTC datetime value",
                self.time_field
            ))),
        }
    }

    /// MongoDB's default index of a time-series collection with a `metaField`.
    pub fn default_index(&self) -> Option<Document> {
        let meta = self.meta_field.as_ref()?;
        let name = format!("{meta}_1_{}_1", self.time_field);
        Some(doc! {"key": {meta.clone(): 1, self.time_field.clone(): 1}, "name": name})
    }
}

fn expire_seconds(value: &Bson) -> Result<i64> {
    let seconds = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 => *d as i64,
        _ => return Err(Error::InvalidOptions("'expireAfterSeconds' must be a whole number".into())),
    };
    if seconds < 0 {
        return Err(Error::InvalidOptions("'expireAfterSeconds' must be a positive number".into()));
    }
    Ok(seconds)
}

/// `granularity`, or `bucketMaxSpanSeconds` with an equal `bucketRoundingSeconds`.
fn check_bucketing(spec: &Document) -> Result<()> {
    for key in spec.keys() {
        if !matches!(
            key.as_str(),
            "timeField" | "metaField" | "granularity" | "bucketMaxSpanSeconds" | "bucketRoundingSeconds"
        ) {
            return Err(Error::Query(idl::unknown_field(&format!("timeseries.{key}"))));
        }
    }
    if let Some(granularity) = spec.get("granularity") {
        match granularity {
            Bson::String(g) if matches!(g.as_str(), "seconds" | "minutes" | "hours") => {}
            Bson::String(g) => {
                return Err(Error::bad_value(format!(
                    "Enumeration value '{g}' for field 'timeseries.granularity' is not a valid value."
                )));
            }
            _ => return Err(Error::TypeMismatch("BSON field 'timeseries.granularity' must be a string".into())),
        }
    }
    let seconds = |name: &str| spec.get(name).and_then(query::number::Num::from_bson).map(|n| n.to_f64());
    let granularity_span = match spec.get_str("granularity") {
        Ok("minutes") => Some(86_400.0),
        Ok("hours") => Some(2_592_000.0),
        Ok(_) => Some(3_600.0),
        Err(_) => None,
    };
    match (seconds("bucketMaxSpanSeconds"), seconds("bucketRoundingSeconds")) {
        (None, None) => Ok(()),
        // As MongoDB reports a granularity: with its span.
        (Some(span), None) if granularity_span == Some(span) => Ok(()),
        (Some(_), Some(_)) if spec.contains_key("granularity") => Err(Error::InvalidOptions(
            "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' cannot be set with 'granularity'".into(),
        )),
        (Some(span), Some(rounding)) if span == rounding && (1.0..=31_536_000.0).contains(&span) => Ok(()),
        (Some(_), Some(_)) => Err(Error::InvalidOptions(
            "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' must be equal and between 1 and 31536000"
                .into(),
        )),
        _ => Err(Error::InvalidOptions(
            "Time-series 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' must both be set".into(),
        )),
    }
}
