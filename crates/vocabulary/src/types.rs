//! BSON type names as MongoDB spells them (`$type`, error messages): the one list.

/// Each BSON type's name and number (MongoDB's `$type` aliases, in number order).
pub const TYPE_NAMES: &[(&str, i32)] = &[
    ("double", 1),
    ("string", 2),
    ("object", 3),
    ("array", 4),
    ("binData", 5),
    ("undefined", 6),
    ("objectId", 7),
    ("bool", 8),
    ("date", 9),
    ("null", 10),
    ("regex", 11),
    ("dbPointer", 12),
    ("javascript", 13),
    ("symbol", 14),
    ("javascriptWithScope", 15),
    ("int", 16),
    ("timestamp", 17),
    ("long", 18),
    ("decimal", 19),
    ("minKey", -1),
    ("maxKey", 127),
];

/// The name of the BSON type numbered `number` (the element type byte, signed: minKey is -1).
pub fn type_name(number: i32) -> Option<&'static str> {
    TYPE_NAMES.iter().find(|(_, n)| *n == number).map(|(name, _)| *name)
}

/// The number of the BSON type called `name`.
pub fn type_number(name: &str) -> Option<i32> {
    TYPE_NAMES.iter().find(|(n, _)| *n == name).map(|(_, number)| *number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_round_trip() {
        for &(name, number) in TYPE_NAMES {
            assert_eq!(type_name(number), Some(name));
            assert_eq!(type_number(name), Some(number));
        }
        assert_eq!(type_name(20), None);
    }
}
