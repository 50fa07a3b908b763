//! The input thread: blocking reads of stdin, the line decoder, and in-order admission of each
//! record (docs/rpc.md#processing-order) with backpressure from the output queue.

use std::io::Read;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::mpsc;
use zi_os::sync::lock;
use zi_protocol::errors::{ProtocolError, ProtocolErrorCode};

use super::{Connection, InputEnd};
use crate::input_buffer::InputBuffer;
use crate::line_decoder::LineDecoder;

/// Starts the input thread: it reads records and admits each in order
/// (docs/rpc.md#processing-order) while `admitting` is true, pausing while output has no room
/// (docs/rpc.md#backpressure-and-bounds), and reports how input ended on `ended`.
pub(super) fn spawn_reader<R: Read + Send + 'static>(
    input: R,
    connection: Weak<Connection>,
    admitting: Arc<Mutex<bool>>,
    ended: mpsc::Sender<InputEnd>,
) {
    let runtime = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new()
        .name("zi-rpc-input".into())
        .spawn(move || {
            // Handlers spawn tasks on the connection's runtime.
            let _context = runtime.enter();
            let reader = Reader {
                connection,
                admitting,
                runtime: runtime.clone(),
            };
            if let Some(end) = reader.run(input) {
                let _ = ended.blocking_send(end);
            }
        });
    if let Err(error) = spawned {
        tracing::error!("could not start the RPC input thread: {error}");
    }
}

struct Reader {
    connection: Weak<Connection>,
    admitting: Arc<Mutex<bool>>,
    runtime: tokio::runtime::Handle,
}

impl Reader {
    /// Reads and admits records until input ends (`Some`) or the connection stopped (`None`).
    fn run<R: Read>(&self, mut input: R) -> Option<InputEnd> {
        let mut decoder = LineDecoder::new();
        let mut buffer = InputBuffer::default();
        let mut lines = Vec::new();
        loop {
            let read = match buffer.read_from(&mut input) {
                Ok([]) => {
                    return match decoder.finish() {
                        Ok(Some(line)) => self.admit(&line).then_some(InputEnd::Eof),
                        Ok(None) => Some(InputEnd::Eof),
                        Err(error) => self.framing(error.message()),
                    };
                }
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Some(InputEnd::ReadError(error.to_string())),
            };
            let pushed = decoder.push(read, &mut lines);
            if !self.admit_all(&mut lines) {
                return None;
            }
            if let Err(error) = pushed {
                return self.framing(error.message());
            }
        }
    }

    /// Admits the records of one read with the output corked, so that their responses leave
    /// together; false once the connection has stopped admitting.
    fn admit_all(&self, lines: &mut Vec<String>) -> bool {
        let Some(connection) = self.connection.upgrade() else {
            return false;
        };
        if lines.len() < 2 {
            return lines.drain(..).all(|line| self.admit(&line));
        }
        connection.output.cork();
        let admitted = lines.drain(..).all(|line| self.admit(&line));
        connection.output.uncork();
        admitted
    }

    /// Admits one record; false once the connection has stopped admitting.
    fn admit(&self, line: &str) -> bool {
        let Some(connection) = self.connection.upgrade() else {
            return false;
        };
        // Reading pauses while output is over its room, so a client that writes far ahead
        // of its reading cannot pile up responses. The writer must run meanwhile.
        if !connection.output.has_room() {
            connection.output.uncork();
            self.runtime.block_on(connection.output.room());
        }
        let admitting = lock(&self.admitting);
        if !*admitting {
            return false;
        }
        connection.admit(line);
        true
    }

    /// Queues the fatal `invalid_framing` frame (while the connection is open).
    fn framing(&self, message: &'static str) -> Option<InputEnd> {
        let connection = self.connection.upgrade()?;
        let admitting = lock(&self.admitting);
        if !*admitting {
            return None;
        }
        connection.protocol_error(ProtocolError {
            code: ProtocolErrorCode::InvalidFraming,
            message: message.to_string(),
            id: None,
        });
        Some(InputEnd::Framing(message))
    }
}
