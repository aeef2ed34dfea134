//! The read side: bounds, planner, access methods, covered reads, find/count/distinct, explain.

pub mod bounds;
pub mod covered;
pub mod explain;
pub mod find;
pub mod geo;
pub mod planner;
pub mod scan;
pub mod text;
