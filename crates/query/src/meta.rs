//! `{$meta: "textScore"}`: a document's text-search score, which MongoDB keeps as metadata
//! beside the document. Here it travels as a hidden field of the document ([`TEXT_SCORE_FIELD`]),
//! set by a `$text` query whose caller asks for it and read by the `$meta` expression and
//! `{$meta: "textScore"}` sorts; the reader removes it before a document leaves. `$project`
//! (inclusion or exclusion) carries it over, as MongoDB's metadata survives a projection;
//! `$group` makes new documents without it. Other metadata (`searchScore`,
//! `indexKey`, ...) is refused (17308).

use bson::Bson;
use vocabulary::location;

use crate::error::{QueryError, fail};

/// The hidden field that carries a document's text score.
pub const TEXT_SCORE_FIELD: &str = "__strata_text_score";

/// Whether a value is `{$meta: "textScore"}`.
pub fn is_text_score(value: &Bson) -> bool {
    matches!(value, Bson::Document(meta) if meta.len() == 1 && meta.get_str("$meta").is_ok_and(|kind| kind == "textScore"))
}

/// The field a `$meta` names, or MongoDB's error for what Strata does not keep.
pub fn field(argument: &Bson) -> Result<&'static str, QueryError> {
    match argument {
        Bson::String(kind) if kind == "textScore" => Ok(TEXT_SCORE_FIELD),
        Bson::String(kind) => {
            Err(fail(location::META_ARGUMENT_UNSUPPORTED, format!("Unsupported argument to $meta: {kind}")))
        }
        _ => Err(fail(location::META_ARGUMENT_NOT_STRING, "$meta only supports string arguments")),
    }
}
