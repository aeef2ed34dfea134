//! `backwards: true`: French secondary order, where accents are compared from the end of the
//! string (so "cote" < "côte" < "coté" < "côté").
//!
//! ICU4X's collator has this setting but takes it only from a locale's data (Canadian French
//! sets it), not from its options. So a collator with `backwards` is built from the compiled
//! data through this provider, which hands out every table as the compiled data has it and the
//! locale's metadata with the backward-secondary bit set.

use icu_collator::provider::{
    Baked, CollationDiacriticsV1, CollationJamoV1, CollationMetadata, CollationMetadataV1, CollationReorderingV1,
    CollationRootV1, CollationSpecialPrimariesV1, CollationTailoringV1,
};
use icu_normalizer::provider::{NormalizerNfdDataV1, NormalizerNfdTablesV1};
use icu_provider::prelude::*;

/// The compiled data, with the backward-secondary bit set in every locale's metadata.
pub struct BackwardSecondLevel;

/// `CollationMetadata::BACWARD_SECOND_LEVEL_MASK` (crate-private in ICU4X): bit 7 of the
/// metadata's bits, which `CollatorOptions::resolve` turns into the backward-secondary option.
const BACKWARD_SECOND_LEVEL_BIT: u32 = 1 << 7;

impl DataProvider<CollationMetadataV1> for BackwardSecondLevel {
    fn load(&self, request: DataRequest<'_>) -> Result<DataResponse<CollationMetadataV1>, DataError> {
        let response: DataResponse<CollationMetadataV1> = Baked.load(request)?;
        let bits = response.payload.get().bits | BACKWARD_SECOND_LEVEL_BIT;
        Ok(DataResponse { metadata: response.metadata, payload: DataPayload::from_owned(CollationMetadata { bits }) })
    }
}

/// The other tables, exactly as compiled.
macro_rules! as_compiled {
    ($($marker:ty => $provider:expr),* $(,)?) => {
        $(impl DataProvider<$marker> for BackwardSecondLevel {
            fn load(&self, request: DataRequest<'_>) -> Result<DataResponse<$marker>, DataError> {
                $provider.load(request)
            }
        })*
    };
}

as_compiled! {
    CollationRootV1 => Baked,
    CollationTailoringV1 => Baked,
    CollationDiacriticsV1 => Baked,
    CollationJamoV1 => Baked,
    CollationReorderingV1 => Baked,
    CollationSpecialPrimariesV1 => Baked,
    NormalizerNfdDataV1 => icu_normalizer::provider::Baked,
    NormalizerNfdTablesV1 => icu_normalizer::provider::Baked,
}
