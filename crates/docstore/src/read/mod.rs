//! The read side: bounds, planner, access methods, covered reads, find/count/distinct, explain.

pub(crate) mod bounds;
pub(crate) mod covered;
pub(crate) mod explain;
pub(crate) mod find;
pub(crate) mod geo;
pub(crate) mod planner;
pub(crate) mod scan;
pub(crate) mod text;
