//! `Writes`: where a write goes before it commits — a [`Transaction`] about to commit, or a long
//! transaction's [`PendingWrites`] — so that code building writes (a document and its index
//! entries) need not know which.

use crate::pending::PendingWrites;
use crate::transaction::Transaction;
use crate::tree::TreeId;

pub trait Writes {
    fn put(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>);
    fn delete(&mut self, tree: TreeId, key: Vec<u8>);
    /// See `Transaction::insert_if_absent`: checked at commit.
    fn insert_if_absent(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>);
    /// A blind update (the engine's update function).
    fn update(&mut self, tree: TreeId, key: Vec<u8>, operand: Vec<u8>);
}

impl Writes for Transaction<'_> {
    fn put(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>) {
        Transaction::put(self, tree, key, value);
    }

    fn delete(&mut self, tree: TreeId, key: Vec<u8>) {
        Transaction::delete(self, tree, key);
    }

    fn insert_if_absent(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>) {
        Transaction::insert_if_absent(self, tree, key, value);
    }

    fn update(&mut self, tree: TreeId, key: Vec<u8>, operand: Vec<u8>) {
        Transaction::update(self, tree, key, operand);
    }
}

impl Writes for PendingWrites {
    fn put(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>) {
        PendingWrites::put(self, tree, key, value);
    }

    fn delete(&mut self, tree: TreeId, key: Vec<u8>) {
        PendingWrites::delete(self, tree, key);
    }

    fn insert_if_absent(&mut self, tree: TreeId, key: Vec<u8>, value: Vec<u8>) {
        PendingWrites::insert_if_absent(self, tree, key, value);
    }

    fn update(&mut self, tree: TreeId, key: Vec<u8>, operand: Vec<u8>) {
        PendingWrites::update(self, tree, key, operand);
    }
}
