//! Strata's query language as pure functions over documents: no I/O.
//!
//! - [`filter`]: parsed, validated query filters and matching.
//! - [`projection`]: find projections and the `$project`/`$unset` stages.
//! - [`sort`]: sort specifications (find and the stages), skip and limit.
//! - [`update`]: update operators, replacement, upsert seeds.
//! - [`number`]: numbers and MongoDB's type promotion, for expressions and update operators.
//! - [`error`]: the crate's error enum, carrying MongoDB codes.

// Library code returns errors instead of panicking; tests may unwrap.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod collation;
pub mod error;
pub mod expr;
pub mod filter;
/// Fuzz entry points (`fuzz/`, and the corpus replay test): not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing;
pub mod geo;
pub mod meta;
pub mod number;
pub mod pipeline;
pub mod projection;
pub mod sort;
pub mod update;

/// MongoDB's truthiness of a value given as a flag (`$exists`, an index's `unique`, `$cond`):
/// false, zeros of every number type, null and undefined are false; everything else is true.
pub use expr::is_truthy as truthy;
