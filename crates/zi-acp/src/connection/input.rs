//! The input thread: blocking reads of stdin, split into lines, each handled in order (the
//! synchronous part of its handler runs here), pausing while output has no room.

use std::io::Read;
use std::sync::Weak;

use tokio::sync::mpsc;
use zi_rpc::input_buffer::InputBuffer;

use super::Connection;
use crate::lines::{LineSplitter, Record};

/// Starts the input thread; it reports how input ended (`Err`: a read failed).
pub(super) fn spawn_reader<R: Read + Send + 'static>(
    input: R,
    connection: Weak<Connection>,
    ended: mpsc::Sender<std::io::Result<()>>,
) {
    let runtime = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new()
        .name("zi-acp-input".into())
        .spawn(move || {
            let _context = runtime.enter();
            let end = read(input, &connection, &runtime);
            let _ = ended.blocking_send(end);
        });
    if let Err(error) = spawned {
        tracing::error!("could not start the ACP input thread: {error}");
    }
}

fn read<R: Read>(
    mut input: R,
    connection: &Weak<Connection>,
    runtime: &tokio::runtime::Handle,
) -> std::io::Result<()> {
    let mut splitter = LineSplitter::default();
    let mut buffer = InputBuffer::default();
    let mut records = Vec::new();
    loop {
        let read = match buffer.read_from(&mut input) {
            Ok([]) => {
                splitter.finish(&mut records);
                handle_all(connection, runtime, &mut records);
                return Ok(());
            }
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        splitter.push(read, &mut records);
        if !handle_all(connection, runtime, &mut records) {
            return Ok(());
        }
    }
}

/// Handles the records of one read; false once the connection is gone or stopping.
fn handle_all(
    connection: &Weak<Connection>,
    runtime: &tokio::runtime::Handle,
    records: &mut Vec<Record>,
) -> bool {
    let Some(connection) = connection.upgrade() else {
        return false;
    };
    for record in records.drain(..) {
        if connection.stopping() {
            return false;
        }
        // A client that writes far ahead of its reading waits here instead of piling up
        // responses (the writer runs meanwhile).
        if !connection.link.output.has_room() {
            runtime.block_on(connection.link.output.room());
        }
        connection.handle(record);
    }
    true
}
