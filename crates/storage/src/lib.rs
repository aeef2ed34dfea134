//! Strata storage engine (in progress).
