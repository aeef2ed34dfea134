//! Command reply builders in MongoDB's shapes: `{ok: 1}` and `{ok: 0, errmsg, code, codeName}`.
//! (A write command's `writeErrors` entries are the server's, built from store errors in its
//! `store_error` module; the E11000 text is `vocabulary`'s.)
//!
//! `ok` is a double, as MongoDB sends it. Field order follows MongoDB: result fields first and
//! `ok` last in a success; `ok, errmsg, code, codeName` in a failure.

use bson::{Document, doc};

use vocabulary::ErrorCode;

/// `{...fields, ok: 1.0}`; an `ok` already in `fields` is replaced and moved last.
pub fn ok_reply(mut fields: Document) -> Document {
    fields.remove("ok");
    fields.insert("ok", 1.0);
    fields
}

/// `{ok: 0.0, errmsg, code, codeName}`.
pub fn error_reply(code: ErrorCode, errmsg: impl Into<String>) -> Document {
    doc! {
        "ok": 0.0,
        "errmsg": errmsg.into(),
        "code": code.code(),
        "codeName": code.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the error reply has MongoDB's fields, types and order.
    #[test]
    fn error_reply_shape() {
        let reply = error_reply(ErrorCode::CommandNotFound, "no such command: 'frobnicate'");
        assert_eq!(
            reply,
            doc! { "ok": 0.0, "errmsg": "no such command: 'frobnicate'", "code": 59, "codeName": "CommandNotFound" }
        );
        let keys: Vec<&str> = reply.keys().map(String::as_str).collect();
        assert_eq!(keys, ["ok", "errmsg", "code", "codeName"]);
    }

    /// Goal: ok comes last and is a double, replacing any earlier ok.
    #[test]
    fn ok_reply_puts_ok_last() {
        let reply = ok_reply(doc! { "ok": 0, "n": 3 });
        assert_eq!(reply, doc! { "n": 3, "ok": 1.0 });
        assert_eq!(reply.keys().last().map(String::as_str), Some("ok"));
    }
}
