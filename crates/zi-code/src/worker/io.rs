//! The worker's side of the framing: raw `read`/`write`/`poll` on fds 0 and 1 (the only
//! descriptors its seccomp allowlist lets it use), no std buffering and no locks.

use std::time::Duration;

use serde_json::Value;

use crate::protocol::{MAX_FRAME, frame};

pub(super) const STDIN: i32 = 0;
const STDOUT: i32 = 1;

/// Writes one frame to stdout; a failed write means the host is gone, so the worker leaves.
pub(super) fn send_body(body: &[u8]) {
    if write_all(STDOUT, &frame(body)).is_err() {
        exit(3);
    }
}

pub(super) fn send(value: &Value) {
    match serde_json::to_vec(value) {
        Ok(body) => send_body(&body),
        Err(_) => exit(3),
    }
}

/// Ends the worker without unwinding or destructors (the engine and the process go together).
pub(super) fn exit(code: i32) -> ! {
    // SAFETY: _exit(2) never returns and needs nothing.
    unsafe { libc::_exit(code) }
}

fn write_all(fd: i32, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: write(2) from a live slice.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// Why the host's input cannot be read as frames.
#[derive(Debug)]
pub(super) enum FrameError {
    TooLarge(usize),
    NotAnObject(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::TooLarge(length) => write!(f, "a frame of {length} bytes"),
            FrameError::NotAnObject(problem) => {
                write!(f, "a frame that is not an object: {problem}")
            }
        }
    }
}

/// An incremental reader of the host's frames: [`FrameReader::fill`] never blocks longer than
/// asked, so the engine's interrupt handler can look for a `cancel` with a zero timeout.
pub(super) struct FrameReader {
    fd: i32,
    buffer: Vec<u8>,
    pub(super) eof: bool,
}

impl FrameReader {
    pub(super) fn new(fd: i32) -> FrameReader {
        FrameReader {
            fd,
            buffer: Vec::with_capacity(64 << 10),
            eof: false,
        }
    }

    /// Waits up to `timeout` (`None`: for ever) for input and reads what is there.
    pub(super) fn fill(&mut self, timeout: Option<Duration>) {
        if self.eof {
            return;
        }
        let mut pollfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
        // SAFETY: poll(2) on one pollfd on the stack.
        if unsafe { libc::poll(&mut pollfd, 1, ms) } <= 0 {
            return;
        }
        let mut chunk = [0u8; 64 << 10];
        // SAFETY: read(2) into a stack buffer of the given length.
        let n = unsafe { libc::read(self.fd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n > 0 {
            self.buffer.extend_from_slice(&chunk[..n as usize]);
        } else if n == 0
            || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
        {
            // EOF, or an error on our own pipe: the host is gone either way.
            self.eof = true;
        }
    }

    /// The next complete frame already read, if any.
    pub(super) fn next_frame(&mut self) -> Option<Result<Value, FrameError>> {
        let prefix: [u8; 4] = self.buffer.get(..4)?.try_into().ok()?;
        let length = u32::from_be_bytes(prefix) as usize;
        if length > MAX_FRAME {
            return Some(Err(FrameError::TooLarge(length)));
        }
        let body = self.buffer.get(4..4 + length)?;
        let parsed = serde_json::from_slice::<Value>(body);
        self.buffer.drain(..4 + length);
        Some(match parsed {
            Ok(value @ Value::Object(_)) => Ok(value),
            Ok(_) => Err(FrameError::NotAnObject("not an object".into())),
            Err(error) => Err(FrameError::NotAnObject(error.to_string())),
        })
    }

    /// Blocks until a whole frame is there; `None` at EOF.
    pub(super) fn wait_frame(&mut self) -> Option<Result<Value, FrameError>> {
        loop {
            if let Some(frame) = self.next_frame() {
                return Some(frame);
            }
            if self.eof {
                return None;
            }
            self.fill(None);
        }
    }
}
