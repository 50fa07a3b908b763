//! The input threads' read buffer: it starts small and grows while reads fill it.
//!
//! An idle agent has read nothing, and a client that sends small records never fills even the
//! first size, so the reader keeps a page of buffer instead of the 64 KiB a burst of input can
//! use (docs/performance.md#start-up-and-idle-memory). A client that writes faster than zi reads
//! fills each read; the buffer then doubles on each full read until it reaches [`MAX_READ`].

use std::io::{self, Read};

/// The first read's size.
const FIRST_READ: usize = 4 * 1024;
/// The largest read.
pub const MAX_READ: usize = 64 * 1024;

/// A read buffer that grows while reads fill it.
pub struct InputBuffer {
    buffer: Vec<u8>,
    /// The last read filled the buffer: the next one is larger.
    filled: bool,
}

impl Default for InputBuffer {
    fn default() -> Self {
        InputBuffer {
            buffer: vec![0; FIRST_READ],
            filled: false,
        }
    }
}

impl InputBuffer {
    /// One read from `input`: the bytes read, empty at end of input.
    pub fn read_from<R: Read>(&mut self, input: &mut R) -> io::Result<&[u8]> {
        if self.filled && self.buffer.len() < MAX_READ {
            self.buffer.resize(self.buffer.len() * 2, 0);
        }
        let read = input.read(&mut self.buffer)?;
        self.filled = read == self.buffer.len();
        Ok(&self.buffer[..read])
    }

    /// The size of the next read unless the last one filled the buffer.
    pub fn capacity(&self) -> usize {
        self.buffer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_reads_keep_the_first_size_and_full_reads_double_it_up_to_the_bound() {
        let mut buffer = InputBuffer::default();
        let mut small: &[u8] = b"{\"version\":1}\n";
        assert_eq!(buffer.read_from(&mut small).unwrap(), b"{\"version\":1}\n");
        assert_eq!(buffer.read_from(&mut small).unwrap(), b"");
        assert_eq!(buffer.capacity(), FIRST_READ);

        let burst = vec![b'x'; 4 * MAX_READ];
        let mut input: &[u8] = &burst;
        let mut sizes = Vec::new();
        let mut total = 0;
        loop {
            let read = buffer.read_from(&mut input).unwrap().len();
            if read == 0 {
                break;
            }
            sizes.push(read);
            total += read;
        }
        assert_eq!(total, burst.len());
        assert_eq!(sizes[..5], [4096, 8192, 16384, 32768, 65536]);
        assert!(sizes[5..].iter().all(|&size| size <= MAX_READ));
        assert_eq!(buffer.capacity(), MAX_READ);
    }
}
