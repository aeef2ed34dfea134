//! MongoDB's vocabulary, in one place for every crate: error codes and their `codeName`s
//! (`codes`), named assertion-site codes (`location`), MongoDB's error categories and labels (`categories`), BSON type names (`types`), and the E11000 message (`messages`). The layers keep their errors in their own words (`storage::Error`,
//! `document::Error`, `query::QueryError`, `docstore::Error`); each says which MongoDB code it
//! is through this table, and `server` turns that into a reply.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod categories;
pub mod codes;
pub mod location;
pub mod messages;
pub mod types;

pub use categories::{Category, Label};
pub use codes::{Code, ErrorCode, code_name, known_code_name};
pub use messages::{duplicate_key_message, format_document};
pub use types::{type_name, type_number};
