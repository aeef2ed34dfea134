//! The checkpoint catalog: which trees exist, their roots, and the block of every node (the block
//! translation table), as of one checkpoint. Written as one block (node id 0) per checkpoint.
//!
//! ```text
//! catalog := tree_count:u32 (tree_id:u64 name:bytes root:u64)*
//!            block_count:u32 (node_id:u64 offset:u64 len:u32)*
//! ```

use crate::error::Result;
use crate::file::BlockAddr;
use crate::node::codec::Reader;

/// node_id:u64 offset:u64 len:u32
const BLOCK_ENTRY_BYTES: usize = 20;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub trees: Vec<CatalogTree>,
    pub blocks: Vec<(u64, BlockAddr)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogTree {
    pub id: u64,
    pub name: String,
    pub root: u64,
}

impl Catalog {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Catalog::encoded_len(&self.trees, self.blocks.len()));
        out.extend_from_slice(&(self.trees.len() as u32).to_le_bytes());
        for tree in &self.trees {
            out.extend_from_slice(&tree.id.to_le_bytes());
            out.extend_from_slice(&(tree.name.len() as u32).to_le_bytes());
            out.extend_from_slice(tree.name.as_bytes());
            out.extend_from_slice(&tree.root.to_le_bytes());
        }
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        for (node, addr) in &self.blocks {
            out.extend_from_slice(&node.to_le_bytes());
            out.extend_from_slice(&addr.offset.to_le_bytes());
            out.extend_from_slice(&addr.len.to_le_bytes());
        }
        out
    }

    /// The length of `encode`'s bytes for these trees and this many blocks: a checkpoint
    /// reserves the catalog's space before it knows the blocks' addresses.
    pub fn encoded_len(trees: &[CatalogTree], block_count: usize) -> usize {
        let trees: usize = trees.iter().map(|tree| 8 + 4 + tree.name.len() + 8).sum();
        4 + trees + 4 + block_count * BLOCK_ENTRY_BYTES
    }

    pub fn decode(bytes: &[u8]) -> Result<Catalog> {
        let mut r = Reader::new(bytes);
        let tree_count = r.count(20)?;
        let mut trees = Vec::with_capacity(tree_count);
        for _ in 0..tree_count {
            let id = r.u64()?;
            let name = String::from_utf8_lossy(r.bytes()?).into_owned();
            trees.push(CatalogTree { id, name, root: r.u64()? });
        }
        let block_count = r.count(BLOCK_ENTRY_BYTES)?;
        let mut blocks = Vec::with_capacity(block_count);
        for _ in 0..block_count {
            let node = r.u64()?;
            blocks.push((node, BlockAddr { offset: r.u64()?, len: r.u32()? }));
        }
        r.finish()?;
        Ok(Catalog { trees, blocks })
    }
}

#[cfg(test)]
mod tests {
    //! Goal: catalogs round-trip; truncations are errors.
    use super::*;

    #[test]
    fn round_trip() {
        let catalog = Catalog {
            trees: vec![CatalogTree { id: 3, name: "db.coll".into(), root: 17 }],
            blocks: vec![(17, BlockAddr { offset: 8192, len: 100 }), (18, BlockAddr { offset: 12288, len: 9000 })],
        };
        let bytes = catalog.encode();
        assert_eq!(bytes.len(), Catalog::encoded_len(&catalog.trees, catalog.blocks.len()));
        assert_eq!(Catalog::decode(&bytes), Ok(catalog));
        for len in 0..bytes.len() {
            assert!(Catalog::decode(&bytes[..len]).is_err());
        }
    }
}
