//! MongoDB's assertion-site codes: the numbers mongod raises at one place each (`uassert(15974,
//! ...)`), whose `codeName` is `Location<code>`. Each has a name here saying what it asserts (as
//! mongod's message says it), so no other crate writes the number; a reply still carries the
//! number, and tests pin it.
//!
//! [`ALL`] lists every constant; a test checks that no two share a number and that none is a
//! number `ErrorCode` names (such a code gets the table's `codeName`, not `Location<code>`).

macro_rules! locations {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        $($(#[$doc])* pub const $name: i32 = $code;)*

        /// Every assertion-site code named here, with its constant's name.
        pub const ALL: &[(&str, i32)] = &[$((stringify!($name), $code),)*];
    };
}

locations! {
    // Documents and indexes (document, docstore).
    HASHED_INDEX_KEY_IS_ARRAY = 16766,
    HASHED_INDEX_CANNOT_BE_UNIQUE = 16764,
    AT_MOST_ONE_HASHED_INDEX_FIELD = 31303,
    TEXT_INDEX_NON_TEXT_FIELD_IS_ARRAY = 16675,
    TEXT_INDEX_LANGUAGE_OVERRIDE_UNSUPPORTED = 17262,
    GEO_2D_VALUE_NOT_COORDINATE_PAIR = 13026,
    GEO_2D_POINT_OUTSIDE_BOUNDS = 13027,
    GEO_2DSPHERE_CANNOT_EXTRACT_KEYS = 16755,
    // Reads and pipelines run by the store (docstore).
    MIN_MAX_REQUIRES_HINT = 51173,
    MIN_MAX_INCONSISTENT_WITH_INDEX = 51174,
    GEO_NEAR_NOT_FIRST_STAGE = 40602,
    UNRECOGNIZED_PIPELINE_STAGE = 40324,
    // Users and roles (server).
    ROLE_ALREADY_EXISTS = 51002,
    USER_ALREADY_EXISTS = 51003,
    ROLE_GRANTED_TO_ITSELF = 17166,
    // Projections, sorts and pipeline stages (query).
    PROJECTION_PATH_COLLISION = 31250,
    PROJECTION_EXCLUSION_IN_INCLUSION = 31254,
    PROJECTION_HAS_NO_FIELDS = 51272,
    UNSET_SPECIFICATION_NOT_STRINGS = 31120,
    UNSET_SPECIFICATION_EMPTY = 31002,
    POSITIONAL_PROJECTION_NO_MATCH = 51246,
    SLICE_FIRST_ARGUMENT_NOT_ARRAY = 28724,
    PROJECTION_EMPTY_SUB_PROJECTION = 51270,
    FIELD_PATH_EMPTY = 40352,
    FIELD_PATH_STARTS_WITH_DOLLAR = 16410,
    SORT_SPECIFICATION_NOT_OBJECT = 15973,
    SORT_WITHOUT_KEYS = 15976,
    SORT_META_UNSUPPORTED = 17312,
    SORT_ORDER_NOT_ONE_OR_MINUS_ONE = 15975,
    META_ARGUMENT_UNSUPPORTED = 17308,
    META_ARGUMENT_NOT_STRING = 17307,
    OUT_ARGUMENT_NOT_STRING_OR_OBJECT = 16990,
    MERGE_ARGUMENT_NOT_STRING_OR_OBJECT = 51182,
    MERGE_INTO_NOT_STRING_OR_OBJECT = 51178,
    MERGE_ON_FIELD_MISSING_OR_ARRAY = 51132,
    MERGE_ON_ELEMENT_NOT_STRING = 51134,
    MERGE_ON_NOT_STRING_OR_ARRAY = 51186,
    LOOKUP_ARGUMENT_NOT_STRING = 40321,
    STAGE_NOT_ALLOWED_IN_SUB_PIPELINE = 51047,
    UNWIND_PATH_INVALID = 28818,
    UNWIND_SPECIFICATION_NOT_STRING_OR_OBJECT = 15981,
    UNWIND_PATH_NOT_STRING = 28808,
    UNWIND_INCLUDE_ARRAY_INDEX_HAS_DOLLAR = 28822,
    UNWIND_INCLUDE_ARRAY_INDEX_NOT_STRING = 28810,
    UNWIND_PRESERVE_NOT_BOOLEAN = 28809,
    UNWIND_UNRECOGNIZED_OPTION = 28811,
    UNWIND_WITHOUT_PATH = 28812,
    BUCKET_ARGUMENT_NOT_OBJECT = 40201,
    BUCKET_UNRECOGNIZED_OPTION = 40197,
    BUCKET_WITHOUT_GROUP_BY_OR_BOUNDARIES = 40198,
    BUCKET_GROUP_BY_INVALID = 40202,
    BUCKET_BOUNDARIES_TOO_FEW = 40192,
    BUCKET_DEFAULT_WITHIN_BOUNDARIES = 40199,
    BUCKET_OUTPUT_INVALID = 40196,
    SWITCH_NO_MATCHING_BRANCH = 40066,
    BUCKET_BOUNDARIES_MIXED_TYPES = 40193,
    BUCKET_BOUNDARIES_NOT_ASCENDING = 40194,
    BUCKET_AUTO_ARGUMENT_NOT_OBJECT = 40240,
    BUCKET_AUTO_GRANULARITY_UNSUPPORTED = 40257,
    BUCKET_AUTO_UNRECOGNIZED_OPTION = 40245,
    BUCKET_AUTO_WITHOUT_GROUP_BY_OR_BUCKETS = 40246,
    BUCKET_AUTO_GROUP_BY_INVALID = 40239,
    BUCKET_AUTO_BUCKETS_NOT_POSITIVE_INT32 = 40243,
    BUCKET_AUTO_OUTPUT_INVALID = 40244,
    STAGE_NOT_ONE_FIELD = 40323,
    MATCH_FILTER_NOT_OBJECT = 15959,
    PROJECT_SPECIFICATION_NOT_OBJECT = 15969,
    ADD_FIELDS_SPECIFICATION_NOT_OBJECT = 40272,
    LIMIT_NOT_NUMBER = 15957,
    LIMIT_NOT_POSITIVE = 15958,
    SKIP_NOT_NUMBER = 15972,
    SKIP_NEGATIVE = 15956,
    REPLACE_ROOT_SPECIFICATION_NOT_OBJECT = 40229,
    REPLACE_ROOT_WITHOUT_NEW_ROOT = 40231,
    FIELDS_NOT_OBJECT = 15947,
    FACET_SPECIFICATION_EMPTY = 40169,
    FACET_ARGUMENT_NOT_ARRAY = 40170,
    STAGE_NOT_ALLOWED_IN_FACET = 40600,
    SAMPLE_SPECIFICATION_NOT_OBJECT = 28745,
    SAMPLE_UNRECOGNIZED_OPTION = 28748,
    SAMPLE_SIZE_NOT_NUMBER = 28746,
    SAMPLE_SIZE_NEGATIVE = 28747,
    SAMPLE_WITHOUT_SIZE = 28749,
    STAGE_ONLY_LAST = 40601,
    NEW_ROOT_NOT_OBJECT = 40228,
    DOCUMENTS_NOT_ARRAY = 5858203,
    REDACT_RESULT_NOT_KEEP_DESCEND_PRUNE = 17053,
    GROUP_WITHOUT_ID = 15955,
    GROUP_FIELD_IS_OPERATOR = 40236,
    GROUP_FIELD_HAS_DOT = 40235,
    GROUP_FIELD_NOT_ACCUMULATOR_OBJECT = 40234,
    GROUP_FIELD_NOT_ONE_ACCUMULATOR = 40238,
    UNKNOWN_GROUP_OPERATOR = 15952,
    ACCUMULATOR_NOT_UNARY = 40237,
    SORTED_N_ACCUMULATOR_NOT_OBJECT = 5788001,
    SORTED_N_ACCUMULATOR_UNKNOWN_FIELD = 5788002,
    N_ACCUMULATOR_NOT_OBJECT = 5787801,
    N_ACCUMULATOR_UNKNOWN_FIELD = 5787901,
    N_ACCUMULATOR_WITHOUT_N = 5787906,
    SORTED_N_ACCUMULATOR_WITHOUT_OUTPUT = 5788004,
    N_ACCUMULATOR_WITHOUT_INPUT = 5787907,
    SORTED_N_ACCUMULATOR_SORT_BY_NOT_OBJECT = 5788005,
    COUNT_FIELD_NOT_STRING = 40156,
    COUNT_FIELD_EMPTY = 40157,
    COUNT_FIELD_HAS_DOLLAR = 40158,
    COUNT_FIELD_HAS_DOT = 40160,
    SORT_BY_COUNT_NOT_PATH_OR_EXPRESSION = 40148,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    /// Goal: every assertion-site code and every table code is one number with one name.
    /// Method: collect all numbers, the constants' and `ErrorCode`'s, and look for a repeat.
    #[test]
    fn every_code_is_unique() {
        let mut seen = std::collections::HashMap::new();
        let table = ErrorCode::ALL.iter().map(|code| (code.name(), code.code()));
        for (name, number) in ALL.iter().copied().chain(table) {
            if let Some(first) = seen.insert(number, name) {
                panic!("{number} is both {first} and {name}");
            }
        }
    }

    /// Goal: an assertion-site code's `codeName` is `Location<code>`.
    #[test]
    fn locations_are_named_by_number() {
        for &(_, number) in ALL {
            assert_eq!(crate::code_name(number), format!("Location{number}"));
        }
    }
}
