//! The read side: bounds, planner, access methods, find/count/distinct, explain.

pub mod bounds;
pub mod explain;
pub mod find;
pub mod planner;
pub mod scan;
