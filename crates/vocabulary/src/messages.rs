//! Messages MongoDB's users know by heart, written once: the E11000 duplicate-key text and
//! the log/message notation of documents it embeds (`{ name: "x" }`).

use bson::{Bson, Document};

/// `E11000 duplicate key error collection: db.coll index: name_1 dup key: { name: "x" }`.
pub fn duplicate_key_message(namespace: &str, index_name: &str, key_value: &Document) -> String {
    format!(
        "E11000 duplicate key error collection: {namespace} index: {index_name} dup key: {}",
        format_document(key_value)
    )
}

/// A document in the server's log/message notation: `{ a: 1, b: "x" }`, `{}` when empty.
pub fn format_document(document: &Document) -> String {
    if document.is_empty() {
        return "{}".to_owned();
    }
    let fields: Vec<String> = document.iter().map(|(key, value)| format!("{key}: {}", format_value(value))).collect();
    format!("{{ {} }}", fields.join(", "))
}

fn format_value(value: &Bson) -> String {
    match value {
        Bson::String(text) => format!("{text:?}"),
        Bson::Int32(number) => number.to_string(),
        Bson::Int64(number) => number.to_string(),
        Bson::Double(number) if number.is_finite() && number.fract() == 0.0 => format!("{number:.1}"),
        Bson::Double(number) => number.to_string(),
        Bson::Boolean(flag) => flag.to_string(),
        Bson::Null => "null".to_owned(),
        Bson::ObjectId(id) => format!("ObjectId('{}')", id.to_hex()),
        Bson::DateTime(date) => format!("new Date({})", date.timestamp_millis()),
        Bson::Document(inner) => format_document(inner),
        Bson::Array(items) if items.is_empty() => "[]".to_owned(),
        Bson::Array(items) => {
            let items: Vec<String> = items.iter().map(format_value).collect();
            format!("[ {} ]", items.join(", "))
        }
        Bson::MinKey => "MinKey".to_owned(),
        Bson::MaxKey => "MaxKey".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn duplicate_key_text_is_mongods() {
        assert_eq!(
            duplicate_key_message("test.users", "name_1", &doc! { "name": "x" }),
            r#"E11000 duplicate key error collection: test.users index: name_1 dup key: { name: "x" }"#
        );
        assert_eq!(format_document(&doc! {}), "{}");
        assert_eq!(format_document(&doc! { "a": 1, "b": [1.0, 2.5] }), "{ a: 1, b: [ 1.0, 2.5 ] }");
    }

    /// Goal: compound and typed keys print as the server prints them.
    #[test]
    fn key_values_format_like_mongodb() {
        let id = bson::oid::ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").expect("oid");
        let key = doc! { "a": 1, "b": 2.5, "c": 3.0, "d": id, "e": null, "f": { "g": [1, "h"] }, "i": 7i64 };
        assert_eq!(
            format_document(&key),
            r#"{ a: 1, b: 2.5, c: 3.0, d: ObjectId('65a1b2c3d4e5f60718293a4b'), e: null, f: { g: [ 1, "h" ] }, i: 7 }"#
        );
        assert_eq!(format_document(&doc! {}), "{}");
    }
}
