//! Strata's document layer: pure functions over BSON values, no I/O.
//!
//! - [`order`]: MongoDB's cross-type comparison order ([`compare_values`]).
//! - [`number`]: the exact form in which all BSON numeric types compare.
//! - [`keycodec`]: index keys as bytes whose `memcmp` order is that order.
//! - [`path`]: dotted field paths and the index keys a document yields.
//! - [`scan`]: a stored document's top-level elements, read without building values.
//! - [`error`]: the crate's one error enum.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

/// Fuzz entry point (`fuzz/`, and the corpus replay test): not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing;
pub mod hash;
pub mod keycodec;
pub mod number;
pub mod order;
pub mod path;
pub mod scan;
pub mod stored;

pub use order::{canonical_type_rank, compare_documents, compare_values, values_equal};
pub mod error;

pub use error::{Error, Result};
