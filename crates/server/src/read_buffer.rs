//! A connection's read buffer: the bytes received and not yet cut into frames.
//!
//! Reading from a socket into memory takes an initialized `&mut [u8]` without unsafe code, and
//! a `BytesMut`'s spare capacity is not initialized as far as Rust knows: it had to be zeroed
//! before every read, 16 KiB or more per command (a quarter of the instructions a one-call-per-
//! document client costs the server in user space, though little of its time). Here every byte
//! of the allocation is initialized once, when the buffer grows; a read then overwrites what
//! earlier messages left there.
//!
//! Invariants: `start <= end <= bytes.len()`; the bytes held are `bytes[start..end]`; when
//! nothing is held, `start == end == 0`, so in the usual case of whole messages arriving one at
//! a time each is read at the front and nothing is ever moved.

use std::io::Read;

#[derive(Default)]
pub struct ReadBuffer {
    /// Zeroed where it grew, then only written by reads.
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuffer {
    /// The bytes received and not yet consumed.
    pub fn held(&self) -> &[u8] {
        self.bytes.get(self.start..self.end).unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Bytes of memory the buffer keeps (its allocation, which growth may round up).
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Drops the first `count` bytes held (at most all of them).
    pub fn consume(&mut self, count: usize) {
        self.start = (self.start + count).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        debug_assert!(self.start <= self.end && self.end <= self.bytes.len());
    }

    /// Lets the memory go (an idle connection keeps none).
    pub fn release(&mut self) {
        *self = ReadBuffer::default();
    }

    /// Makes room for at least `additional` more bytes after those held: first by moving them
    /// to the front, then by growing (zeroing only the new bytes).
    pub fn reserve(&mut self, additional: usize) {
        if self.bytes.len() - self.end >= additional {
            return;
        }
        if self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let needed = self.end.saturating_add(additional);
        if self.bytes.len() < needed {
            self.bytes.resize(needed, 0);
        }
    }

    /// One read from `stream` into the room after the bytes held (`reserve` first: with no
    /// room this asks for nothing and returns 0, which a caller would take for end of stream).
    pub fn read_from(&mut self, stream: &mut impl Read) -> std::io::Result<usize> {
        let room = self.bytes.get_mut(self.end..).unwrap_or_default();
        let received = stream.read(room)?;
        self.end += received;
        debug_assert!(self.end <= self.bytes.len());
        Ok(received)
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::ReadBuffer;

    /// Reads at most `limit` bytes a call, as a socket that delivers a message in pieces.
    struct Trickle<'a> {
        data: &'a [u8],
        limit: usize,
    }

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            let count = self.data.len().min(buffer.len()).min(self.limit);
            let (now, later) = self.data.split_at(count);
            buffer.get_mut(..count).unwrap_or_default().copy_from_slice(now);
            self.data = later;
            Ok(count)
        }
    }

    #[test]
    fn holds_what_was_read_and_not_consumed_against_a_model() {
        let seed: u64 = rand::random();
        println!("seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        let stream: Vec<u8> = (0..200_000).map(|_| rng.r#gen()).collect();
        let mut source = Trickle { data: &stream, limit: 1 };
        let mut buffer = ReadBuffer::default();
        let (mut read, mut consumed) = (0, 0);
        while read < stream.len() {
            source.limit = rng.gen_range(1..5_000);
            buffer.reserve(rng.gen_range(1..8_000));
            read += buffer.read_from(&mut source).unwrap();
            assert_eq!(buffer.held(), &stream[consumed..read], "seed {seed}");
            if rng.gen_bool(0.7) {
                let count = rng.gen_range(0..=buffer.len() + 10);
                buffer.consume(count);
                consumed = (consumed + count).min(read);
            }
            if buffer.is_empty() && rng.gen_bool(0.1) {
                buffer.release();
                assert_eq!(buffer.capacity(), 0);
            }
            assert_eq!(buffer.held(), &stream[consumed..read], "seed {seed}");
            assert_eq!(buffer.len(), read - consumed);
        }
    }

    #[test]
    fn a_message_at_a_time_is_read_at_the_front_and_never_grows_the_buffer_again() {
        let message = vec![7u8; 300];
        let mut buffer = ReadBuffer::default();
        for _ in 0..100 {
            buffer.reserve(16 * 1024);
            let mut source = Trickle { data: &message, limit: usize::MAX };
            assert_eq!(buffer.read_from(&mut source).unwrap(), 300);
            assert_eq!(buffer.held(), message.as_slice());
            buffer.consume(300);
            assert!(buffer.is_empty());
        }
        assert_eq!(buffer.capacity(), 16 * 1024);
    }

    #[test]
    fn room_is_made_by_moving_held_bytes_to_the_front_before_growing() {
        let mut buffer = ReadBuffer::default();
        buffer.reserve(100);
        let data: Vec<u8> = (0..100).collect();
        buffer.read_from(&mut Trickle { data: &data, limit: usize::MAX }).unwrap();
        buffer.consume(90);
        buffer.reserve(90);
        assert_eq!(buffer.capacity(), 100, "ten bytes held and ninety of room fit in a hundred");
        assert_eq!(buffer.held(), &data[90..]);
        buffer.reserve(91);
        assert!(buffer.capacity() >= 101);
        assert_eq!(buffer.held(), &data[90..]);
        let more: Vec<u8> = (100..191).collect();
        assert_eq!(buffer.read_from(&mut Trickle { data: &more, limit: usize::MAX }).unwrap(), 91);
        assert_eq!(buffer.held(), [&data[90..], more.as_slice()].concat().as_slice());
    }
}
