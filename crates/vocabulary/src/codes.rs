//! MongoDB's error codes and their `codeName`s: the one table in Strata.
//!
//! Numbers and names follow MongoDB's `error_codes.yml`; only the codes Strata can report, and
//! those MongoDB's error categories name (`categories`), are listed. Every crate names a code
//! through `ErrorCode` or, for MongoDB's *assertion-site* codes (the `Location<code>` codes
//! mongod raises at one place each, such as 16554 for an `$add` of a non-number), through a
//! constant of `crate::location`; [`code_name`] names those `Location<code>`. [`Code`] is either
//! kind as a reply carries it: a number whose name is derived, never stored beside it.

macro_rules! error_codes {
    ($($name:ident = $code:literal,)*) => {
        /// A MongoDB command error code. `code()` is the number, `name()` the `codeName`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        #[allow(clippy::upper_case_acronyms)]
        pub enum ErrorCode {
            $($name,)*
        }

        impl ErrorCode {
            /// Every code in the table, in numeric order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            pub fn code(self) -> i32 {
                match self {
                    $(ErrorCode::$name => $code,)*
                }
            }

            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => stringify!($name),)*
                }
            }

            pub fn from_code(code: i32) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    InternalError = 1,
    BadValue = 2,
    NoSuchKey = 4,
    GraphContainsCycle = 5,
    HostUnreachable = 6,
    HostNotFound = 7,
    UnknownError = 8,
    FailedToParse = 9,
    CannotMutateObject = 10,
    UserNotFound = 11,
    UnsupportedFormat = 12,
    Unauthorized = 13,
    TypeMismatch = 14,
    Overflow = 15,
    InvalidLength = 16,
    ProtocolError = 17,
    AuthenticationFailed = 18,
    IllegalOperation = 20,
    EmptyArrayOperation = 21,
    InvalidBSON = 22,
    AlreadyInitialized = 23,
    LockTimeout = 24,
    NamespaceNotFound = 26,
    IndexNotFound = 27,
    PathNotViable = 28,
    NonExistentPath = 29,
    InvalidPath = 30,
    RoleNotFound = 31,
    RolesNotRelated = 32,
    ConflictingUpdateOperators = 40,
    CursorNotFound = 43,
    NoMatchingDocument = 47,
    NamespaceExists = 48,
    MaxTimeMSExpired = 50,
    DollarPrefixedFieldName = 52,
    InvalidIdField = 53,
    NotSingleValueField = 54,
    InvalidDBRef = 55,
    EmptyFieldName = 56,
    DottedFieldName = 57,
    CommandNotFound = 59,
    StaleShardVersion = 63,
    WriteConcernTimeout = 64,
    ImmutableField = 66,
    CannotCreateIndex = 67,
    IndexAlreadyExists = 68,
    InvalidOptions = 72,
    InvalidNamespace = 73,
    NodeNotFound = 74,
    NoReplicationEnabled = 76,
    UnknownReplWriteConcern = 79,
    RoleDataInconsistent = 80,
    IndexOptionsConflict = 85,
    IndexKeySpecsConflict = 86,
    NetworkTimeout = 89,
    ShutdownInProgress = 91,
    InvalidReplicaSetConfig = 93,
    NotYetInitialized = 94,
    NotSecondary = 95,
    OperationFailed = 96,
    DBPathInUse = 98,
    UnsatisfiableWriteConcern = 100,
    NewReplicaSetConfigurationIncompatible = 103,
    WriteConflict = 112,
    CommandNotSupported = 115,
    DocTooLargeForCapped = 116,
    ConflictingOperationInProgress = 117,
    DocumentValidationFailure = 121,
    NotAReplicaSet = 123,
    CommandFailed = 125,
    FailedToSatisfyReadPreference = 133,
    ReadConcernMajorityNotAvailableYet = 134,
    CappedPositionLost = 136,
    CursorInUse = 143,
    ExceededMemoryLimit = 146,
    ZLibError = 147,
    StaleEpoch = 150,
    ViewDepthLimitExceeded = 165,
    CommandNotSupportedOnView = 166,
    OptionNotSupportedOnView = 167,
    InvalidPipelineOperator = 168,
    CannotIndexParallelArrays = 171,
    ClientMetadataMissingField = 183,
    ClientMetadataAppNameTooLarge = 184,
    ClientMetadataDocumentTooLarge = 185,
    ClientMetadataCannotBeMutated = 186,
    PrimarySteppedDown = 189,
    InvalidIndexSpecificationOption = 197,
    NoSuchSession = 206,
    InvalidUUID = 207,
    IncompleteTransactionHistory = 217,
    IllegalOpMsgFlag = 223,
    QueryFeatureNotAllowed = 224,
    TransactionTooOld = 225,
    TooManyDocumentSequences = 233,
    RetryChangeStream = 234,
    CursorKilled = 237,
    NotImplemented = 238,
    SnapshotTooOld = 239,
    ConversionFailure = 241,
    CannotCreateCollection = 242,
    SnapshotUnavailable = 246,
    NoSuchTransaction = 251,
    TransactionCommitted = 256,
    TransactionTooLarge = 257,
    InvalidResumeToken = 260,
    ExceededTimeLimit = 262,
    OperationNotSupportedInTransaction = 263,
    PreparedTransactionInProgress = 267,
    ClientDisconnect = 279,
    ChangeStreamFatalError = 280,
    ChangeStreamHistoryLost = 286,
    ChecksumMismatch = 288,
    NoQueryExecutionPlans = 291,
    QueryExceededMemoryLimitNoDiskUseAllowed = 292,
    DataCorruptionDetected = 301,
    APIVersionError = 322,
    APIStrictError = 323,
    MechanismUnavailable = 334,
    UnsupportedOpQueryCommand = 352,
    InvalidBSONType = 357,
    SocketException = 9001,
    LegacyNotPrimary = 10058,
    NotWritablePrimary = 10107,
    BSONObjectTooLarge = 10334,
    DuplicateKey = 11000,
    InterruptedAtShutdown = 11600,
    Interrupted = 11601,
    InterruptedDueToReplStateChange = 11602,
    MergeStageNoMatchingDocument = 13113,
    StaleConfig = 13388,
    NotPrimaryNoSecondaryOk = 13435,
    NotPrimaryOrSecondary = 13436,
    OutOfDiskSpace = 14031,
    SearchNotEnabled = 31082,
    IDLDuplicateField = 40413,
    IDLFailedToParse = 40414,
    IDLUnknownField = 40415,
}

/// A code as a reply carries it: one of the table's ([`ErrorCode`]) or an assertion-site code
/// (`crate::location`). The number is the one thing kept; [`Code::name`] derives the `codeName`
/// from it, so a code and its name cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code(i32);

impl Code {
    /// The code numbered `number` (a table code, an assertion-site code, or a client's number).
    pub const fn new(number: i32) -> Code {
        Code(number)
    }

    /// The number a reply's `code` carries.
    pub const fn number(self) -> i32 {
        self.0
    }

    /// The `codeName` a reply carries: the table's name, or `Location<code>`.
    pub fn name(self) -> &'static str {
        code_name(self.0)
    }

    /// The table's entry for this code, if it has one.
    pub fn known(self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.0)
    }
}

impl From<ErrorCode> for Code {
    fn from(code: ErrorCode) -> Code {
        Code(code.code())
    }
}

impl PartialEq<ErrorCode> for Code {
    fn eq(&self, other: &ErrorCode) -> bool {
        self.0 == other.code()
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// The `codeName` MongoDB gives `code`, if the table knows it.
pub fn known_code_name(code: i32) -> Option<&'static str> {
    ErrorCode::from_code(code).map(ErrorCode::name)
}

/// The `codeName` MongoDB gives `code`: the table's name, or `Location<code>` for an
/// assertion-site code. The `Location` names are made once per code and kept (a bounded set:
/// the codes written in Strata's source).
pub fn code_name(code: i32) -> &'static str {
    match known_code_name(code) {
        Some(name) => name,
        None => interned_location(code),
    }
}

fn interned_location(code: i32) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashMap<i32, &'static str>>> = OnceLock::new();
    let names = NAMES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut names = match names.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    };
    names.entry(code).or_insert_with(|| Box::leak(format!("Location{code}").into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the codes the server relies on carry MongoDB's numbers and names (checked against
    /// MongoDB's error_codes.yml).
    #[test]
    fn codes_match_mongodb() {
        let expected = [
            (1, "InternalError"),
            (2, "BadValue"),
            (4, "NoSuchKey"),
            (5, "GraphContainsCycle"),
            (9, "FailedToParse"),
            (10, "CannotMutateObject"),
            (11, "UserNotFound"),
            (13, "Unauthorized"),
            (32, "RolesNotRelated"),
            (14, "TypeMismatch"),
            (16, "InvalidLength"),
            (17, "ProtocolError"),
            (20, "IllegalOperation"),
            (22, "InvalidBSON"),
            (26, "NamespaceNotFound"),
            (27, "IndexNotFound"),
            (40, "ConflictingUpdateOperators"),
            (43, "CursorNotFound"),
            (48, "NamespaceExists"),
            (50, "MaxTimeMSExpired"),
            (52, "DollarPrefixedFieldName"),
            (59, "CommandNotFound"),
            (66, "ImmutableField"),
            (67, "CannotCreateIndex"),
            (68, "IndexAlreadyExists"),
            (72, "InvalidOptions"),
            (73, "InvalidNamespace"),
            (80, "RoleDataInconsistent"),
            (85, "IndexOptionsConflict"),
            (86, "IndexKeySpecsConflict"),
            (96, "OperationFailed"),
            (115, "CommandNotSupported"),
            (150, "StaleEpoch"),
            (165, "ViewDepthLimitExceeded"),
            (166, "CommandNotSupportedOnView"),
            (223, "IllegalOpMsgFlag"),
            (288, "ChecksumMismatch"),
            (292, "QueryExceededMemoryLimitNoDiskUseAllowed"),
            (301, "DataCorruptionDetected"),
            (10334, "BSONObjectTooLarge"),
            (11000, "DuplicateKey"),
            (13113, "MergeStageNoMatchingDocument"),
        ];
        for (code, name) in expected {
            let found = ErrorCode::from_code(code).unwrap_or_else(|| panic!("code {code} missing"));
            assert_eq!(found.name(), name);
            assert_eq!(found.code(), code);
            assert_eq!(known_code_name(code), Some(name));
            assert_eq!(code_name(code), name);
        }
        assert_eq!(known_code_name(3), None);
        assert_eq!(code_name(16020), "Location16020");
    }

    /// Goal: a `Code` names itself as the table or `Location<code>` does, and equals its
    /// `ErrorCode`.
    #[test]
    fn typed_code_names_itself() {
        let duplicate = Code::from(ErrorCode::DuplicateKey);
        assert_eq!((duplicate.number(), duplicate.name()), (11000, "DuplicateKey"));
        assert_eq!(duplicate, ErrorCode::DuplicateKey);
        assert_eq!(duplicate.known(), Some(ErrorCode::DuplicateKey));
        let location = Code::new(16020);
        assert_eq!((location.number(), location.name()), (16020, "Location16020"));
        assert_eq!(location.known(), None);
        assert_eq!(location.to_string(), "Location16020 (16020)");
    }

    /// Goal: the table is a bijection, sorted by number, so `from_code` finds every entry.
    #[test]
    fn table_is_sorted_and_unique() {
        for pair in ErrorCode::ALL.windows(2) {
            assert!(pair[0].code() < pair[1].code(), "{:?} before {:?}", pair[0], pair[1]);
        }
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
        }
    }
}
