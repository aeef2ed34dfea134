//! Strata's query language as pure functions over documents: no I/O.
//!
//! - [`filter`]: parsed, validated query filters and matching.
//! - [`projection`]: find projections.
//! - [`sort`]: sort specifications, skip and limit.
//! - [`update`]: update operators, replacement, upsert seeds.
//! - [`error`]: the crate's error enum, carrying MongoDB codes.

pub mod error;
pub mod filter;
pub mod projection;
pub mod sort;
pub mod update;
pub mod expr;
pub mod pipeline;
