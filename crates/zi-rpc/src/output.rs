//! The ordered, bounded output queue (docs/rpc.md#backpressure-and-bounds).
//!
//! Frames get their sequence number when they are enqueued, so `sequence` is exactly enqueue
//! order and gap-free. A dedicated writer thread drains the queue in batches and runs each
//! frame's release action (freeing its request id and capacity slot) as its bytes are handed to
//! the write.
//!
//! Pending output is bounded at 1,024 records and 32 MiB, and zi keeps to the bounds by pausing
//! its producers rather than by failing a client that reads: while more than half of either
//! bound is waiting, the agent loop ([`Backpressure`]) and input admission wait for room. A
//! required frame is therefore always queued whole; only a frame over 16 MiB, a serialization
//! failure, or a queue four times over its bounds (which paused producers never reach) fails the
//! connection at enqueue. A client has stopped reading when a producer waits for room and
//! [`STALL_TIMEOUT`] passes without any write progress: the output then fails with
//! `RPC output exceeded its pending-write bound`. A droppable frame (event mode `activity`) that
//! would exceed the bounds is discarded without consuming a sequence number.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Notify;
use zi_agent::session::Backpressure;
use zi_os::sync::lock;
use zi_protocol::errors as messages;
use zi_protocol::frame::{EncodedBody, FrameLine};

/// Pending output bound: records waiting to be written.
pub const MAX_PENDING_RECORDS: usize = 1024;
/// Pending output bound: bytes waiting to be written.
pub const MAX_PENDING_BYTES: usize = 32 * 1024 * 1024;
/// The largest frame, in bytes; a larger required frame fails the connection.
pub const MAX_RECORD_BYTES: usize = 16 * 1024 * 1024;

/// Producers (the agent loop, input admission) pause while this much is pending, so the frames
/// one step emits at once (at most a few, each at most 16 MiB) stay near the bounds.
const ROOM_RECORDS: usize = MAX_PENDING_RECORDS / 2;
const ROOM_BYTES: usize = MAX_PENDING_BYTES / 2;

/// A required frame that would take the queue past these fails the connection at once: a guard
/// for memory that no producer which respects backpressure reaches.
const CEILING_RECORDS: usize = 4 * MAX_PENDING_RECORDS;
const CEILING_BYTES: usize = 4 * MAX_PENDING_BYTES;

/// A producer waiting for room this long without the client accepting a single byte means the
/// client has stopped reading (docs/rpc.md#backpressure-and-bounds).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes handed to one `write` call, so that progress through a large frame is visible.
const WRITE_CHUNK: usize = 64 * 1024;
/// The writer takes queued frames up to about this many bytes per batch (at least one frame), so
/// room is freed as large frames are written rather than after the whole queue.
const BATCH_BYTES: usize = 256 * 1024;

/// Runs after a frame was written, or when output is closed or failed without writing it.
pub type Release = Box<dyn FnOnce() + Send>;

/// Whether a frame may be dropped when the bounds are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Responses, protocol errors and events of mode `all`: always queued.
    Required,
    /// Events of mode `activity`: discarded, without a sequence number, when over the bounds.
    Droppable,
}

/// What a producer hands over: an RPC frame body (sequenced when queued) or a finished line.
enum Line {
    Framed(EncodedBody),
    Plain(Vec<u8>),
}

impl Line {
    /// The written length, LF included.
    fn len(&self, sequence: u64) -> usize {
        match self {
            Line::Framed(body) => body.line_len(sequence),
            Line::Plain(bytes) => bytes.len() + 1,
        }
    }
}

struct Pending {
    line: FrameLine,
    release: Option<Release>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Open,
    /// No more frames are accepted; the writer drains what is queued and stops.
    Closed,
    Failed(String),
}

struct Queue {
    frames: VecDeque<Pending>,
    pending_bytes: usize,
    next_sequence: u64,
    status: Status,
    /// Frames taken by the writer but not yet written.
    in_write: usize,
    /// The writer is parked on `wake_writer` (so only then does enqueue signal it).
    writer_parked: bool,
    /// Input admission is answering a batch of records: the parked writer is woken once when
    /// the batch is done ([`Output::uncork`]) rather than for its first frame, so the batch's
    /// responses leave in one write.
    corked: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake_writer: Condvar,
    /// Signalled when output fails.
    failed: Notify,
    /// Signalled after every written batch.
    progress: Notify,
    /// Bytes the writer has handed to the client so far (progress through large frames).
    written: AtomicU64,
}

/// Handle to the output queue; cheap to clone.
#[derive(Clone)]
pub struct Output {
    shared: Arc<Shared>,
}

impl Output {
    /// Starts the writer thread over `writer`.
    pub fn start<W: Write + Send + 'static>(writer: W) -> std::io::Result<Output> {
        let output = Output::new();
        output.spawn_writer(writer)?;
        Ok(output)
    }

    /// Like [`Output::start`], with `first` (sequence 1) written on the calling thread before
    /// the writer thread is started: the client has it without waiting for a thread to be
    /// created and scheduled (`ready`: docs/performance.md#start-up-and-idle-memory). The
    /// write is one short line to an empty pipe; a failure fails the output as the writer
    /// thread's would.
    pub fn start_with_first<W: Write + Send + 'static>(
        mut writer: W,
        first: Result<EncodedBody, serde_json::Error>,
    ) -> std::io::Result<Output> {
        let output = Output::new();
        if output.enqueue(first, FrameKind::Required, None) {
            let queue = output.lock();
            write_batch(&output.shared, queue, &mut writer, &mut Scratch::default());
        }
        output.spawn_writer(writer)?;
        Ok(output)
    }

    fn new() -> Output {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                frames: VecDeque::new(),
                pending_bytes: 0,
                next_sequence: 1,
                status: Status::Open,
                in_write: 0,
                writer_parked: false,
                corked: false,
            }),
            wake_writer: Condvar::new(),
            failed: Notify::new(),
            progress: Notify::new(),
            written: AtomicU64::new(0),
        });
        Output { shared }
    }

    fn spawn_writer<W: Write + Send + 'static>(&self, writer: W) -> std::io::Result<()> {
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("zi-rpc-output".into())
            .spawn(move || write_loop(shared, writer))?;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        lock(&self.shared.queue)
    }

    /// Enqueues a frame. Returns false if it was not queued (dropped, closed or failed); the
    /// release action has then already run.
    pub fn enqueue(
        &self,
        body: Result<EncodedBody, serde_json::Error>,
        kind: FrameKind,
        release: Option<Release>,
    ) -> bool {
        self.push(body.map(Line::Framed), kind, release)
    }

    /// Enqueues a line of another protocol on the same writer (ACP's JSON-RPC 2.0 messages,
    /// without the RPC envelope): the same order, bounds, backpressure and release rules, and
    /// no sequence number is consumed.
    pub fn enqueue_plain(
        &self,
        line: Result<Vec<u8>, serde_json::Error>,
        kind: FrameKind,
        release: Option<Release>,
    ) -> bool {
        self.push(line.map(Line::Plain), kind, release)
    }

    fn push(
        &self,
        line: Result<Line, serde_json::Error>,
        kind: FrameKind,
        release: Option<Release>,
    ) -> bool {
        let mut queue = self.lock();
        if queue.status != Status::Open {
            drop(queue);
            run_release(release);
            return false;
        }
        let failure = match line {
            Err(_) => Err(messages::OUTPUT_SERIALIZE),
            Ok(line) => {
                let sequence = queue.next_sequence;
                let len = line.len(sequence);
                let (records, bytes) = (
                    queue.frames.len() + queue.in_write + 1,
                    queue.pending_bytes + len,
                );
                let (max_records, max_bytes) = match kind {
                    FrameKind::Required => (CEILING_RECORDS, CEILING_BYTES),
                    FrameKind::Droppable => (MAX_PENDING_RECORDS, MAX_PENDING_BYTES),
                };
                if len > MAX_RECORD_BYTES {
                    Err(messages::OUTPUT_OVERSIZED)
                } else if records > max_records || bytes > max_bytes {
                    Err(messages::OUTPUT_PENDING_BOUND)
                } else {
                    let line = match line {
                        Line::Framed(body) => {
                            queue.next_sequence += 1;
                            body.into_line(sequence)
                        }
                        Line::Plain(bytes) => FrameLine::plain(bytes),
                    };
                    queue.pending_bytes += len;
                    queue.frames.push_back(Pending { line, release });
                    // A busy writer takes this frame with its next batch; waking it costs a
                    // futex call per frame.
                    if queue.writer_parked && !queue.corked {
                        queue.writer_parked = false;
                        self.shared.wake_writer.notify_one();
                    }
                    return true;
                }
            }
        };
        match (kind, failure) {
            (FrameKind::Droppable, _) => {
                drop(queue);
                run_release(release);
                false
            }
            (FrameKind::Required, Err(message)) => {
                let releases = fail_locked(&mut queue, message);
                drop(queue);
                self.after_failure(releases);
                run_release(release);
                false
            }
            (FrameKind::Required, Ok(())) => false,
        }
    }

    /// Holds back waking the writer until [`uncork`](Self::uncork): input admission answers
    /// the records of one read, and their responses go out in one write instead of the first
    /// alone and the rest after it. Never held across a wait.
    pub fn cork(&self) {
        self.lock().corked = true;
    }

    /// Ends [`cork`](Self::cork), waking the writer if frames are waiting for it.
    pub fn uncork(&self) {
        let mut queue = self.lock();
        queue.corked = false;
        if queue.writer_parked && !queue.frames.is_empty() {
            queue.writer_parked = false;
            self.shared.wake_writer.notify_one();
        }
    }

    fn after_failure(&self, releases: Vec<Release>) {
        self.shared.wake_writer.notify_all();
        self.shared.failed.notify_waiters();
        self.shared.failed.notify_one();
        self.shared.progress.notify_waiters();
        for release in releases {
            release();
        }
    }

    /// Stops accepting frames; queued frames are still written.
    pub fn close(&self) {
        let mut queue = self.lock();
        if queue.status == Status::Open {
            queue.status = Status::Closed;
        }
        drop(queue);
        self.shared.wake_writer.notify_all();
        // Producers waiting for room go on (a closed queue has room).
        self.shared.progress.notify_waiters();
    }

    /// Stops accepting frames and drops everything still queued (settlement timeout, or a
    /// client that stopped reading).
    pub fn abandon(&self, message: &str) {
        let mut queue = self.lock();
        let releases = match queue.status {
            Status::Failed(_) => Vec::new(),
            _ => fail_locked(&mut queue, message),
        };
        drop(queue);
        self.after_failure(releases);
    }

    /// The failure message, once output has failed.
    pub fn failure(&self) -> Option<String> {
        match &self.lock().status {
            Status::Failed(message) => Some(message.clone()),
            _ => None,
        }
    }

    /// Resolves when output fails.
    pub async fn failed(&self) {
        loop {
            let notified = self.shared.failed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.failure().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// Resolves when everything queued has been written (or output failed).
    pub async fn drained(&self) {
        loop {
            let notified = self.shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let queue = self.lock();
                if matches!(queue.status, Status::Failed(_))
                    || (queue.frames.is_empty() && queue.in_write == 0)
                {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Whether producers may go on: less than half of either bound is pending, or output is no
    /// longer open.
    pub fn has_room(&self) -> bool {
        let queue = self.lock();
        !matches!(queue.status, Status::Open)
            || (queue.frames.len() + queue.in_write < ROOM_RECORDS
                && queue.pending_bytes < ROOM_BYTES)
    }
}

impl Backpressure for Output {
    fn wait_for_room(&self) -> Option<BoxFuture<'static, ()>> {
        if self.has_room() {
            return None;
        }
        let output = self.clone();
        Some(Box::pin(async move { output.room().await }))
    }
}

impl Output {
    /// Resolves when there is room (or output is closed or failed). A wait that sees no write
    /// progress for [`STALL_TIMEOUT`] fails the output: the client has stopped reading.
    pub async fn room(&self) {
        loop {
            let notified = self.shared.progress.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_room() {
                return;
            }
            let before = self.shared.written.load(Ordering::Acquire);
            if tokio::time::timeout(STALL_TIMEOUT, notified).await.is_err()
                && self.shared.written.load(Ordering::Acquire) == before
                && !self.has_room()
            {
                tracing::warn!(
                    "the RPC client accepted no output for {} s while output waited",
                    STALL_TIMEOUT.as_secs()
                );
                self.abandon(messages::OUTPUT_PENDING_BOUND);
                return;
            }
        }
    }
}

fn run_release(release: Option<Release>) {
    if let Some(release) = release {
        release();
    }
}

/// Marks output failed and takes every queued release action.
fn fail_locked(queue: &mut Queue, message: &str) -> Vec<Release> {
    queue.status = Status::Failed(message.to_string());
    queue.pending_bytes = 0;
    queue.frames.drain(..).filter_map(|p| p.release).collect()
}

fn write_loop<W: Write>(shared: Arc<Shared>, mut writer: W) {
    let mut scratch = Scratch::default();
    loop {
        let mut queue = lock(&shared.queue);
        while queue.frames.is_empty() && queue.status == Status::Open {
            queue.writer_parked = true;
            queue = zi_os::sync::wait(&shared.wake_writer, queue);
        }
        queue.writer_parked = false;
        if !write_batch(&shared, queue, &mut writer, &mut scratch) {
            return;
        }
    }
}

/// The writer's buffers, kept between batches.
#[derive(Default)]
struct Scratch {
    buffer: Vec<u8>,
    batch: Vec<Pending>,
    releases: Vec<Release>,
}

/// Writes one batch of the queued frames; false when the writer is done (output failed, or
/// closed and drained).
fn write_batch<W: Write>(
    shared: &Shared,
    mut queue: MutexGuard<'_, Queue>,
    writer: &mut W,
    scratch: &mut Scratch,
) -> bool {
    let Scratch {
        buffer,
        batch,
        releases,
    } = scratch;
    if matches!(queue.status, Status::Failed(_)) || queue.frames.is_empty() {
        drop(queue);
        shared.progress.notify_waiters();
        return false;
    }
    let mut bytes = 0;
    while let Some(pending) = queue.frames.pop_front() {
        bytes += pending.line.len();
        batch.push(pending);
        if bytes >= BATCH_BYTES {
            break;
        }
    }
    queue.in_write = batch.len();
    drop(queue);
    releases.extend(batch.iter_mut().filter_map(|p| p.release.take()));
    let lines: &[u8] = if let [single] = batch.as_slice() {
        // A lone (possibly large) frame is written from its own buffer.
        single.line.as_bytes()
    } else {
        buffer.clear();
        for pending in batch.iter() {
            buffer.extend_from_slice(pending.line.as_bytes());
        }
        buffer
    };
    // Ids are released as the bytes are handed to the write: a client may read a response
    // and reuse its id before `write_all` returns to this thread, and that reuse must be
    // admitted as a new request.
    for release in releases.drain(..) {
        release();
    }
    let written = write_in_chunks(writer, lines, &shared.written);
    let written_len = lines.len();
    batch.clear();
    let mut queue = lock(&shared.queue);
    queue.in_write = 0;
    queue.pending_bytes = queue.pending_bytes.saturating_sub(written_len);
    if written.is_err() && !matches!(queue.status, Status::Failed(_)) {
        let releases = fail_locked(&mut queue, messages::OUTPUT_WRITE);
        drop(queue);
        shared.failed.notify_waiters();
        shared.failed.notify_one();
        for release in releases {
            release();
        }
    } else {
        drop(queue);
    }
    shared.progress.notify_waiters();
    written.is_ok()
}

/// Writes `bytes` whole, counting progress after every chunk, then flushes.
fn write_in_chunks<W: Write>(
    writer: &mut W,
    bytes: &[u8],
    progress: &AtomicU64,
) -> std::io::Result<()> {
    for chunk in bytes.chunks(WRITE_CHUNK) {
        writer.write_all(chunk)?;
        progress.fetch_add(chunk.len() as u64, Ordering::Release);
    }
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use zi_protocol::frame::encode_success;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("broken"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn body() -> Result<EncodedBody, serde_json::Error> {
        encode_success("a", "m", &serde_json::json!({}))
    }

    /// Counts `write` calls.
    #[derive(Clone, Default)]
    struct CountingSink(Arc<Mutex<(usize, Vec<u8>)>>);

    impl Write for CountingSink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut sink = self.0.lock().unwrap();
            sink.0 += 1;
            sink.1.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// One write: the thread that made it and its bytes.
    type ThreadWrite = (std::thread::ThreadId, Vec<u8>);

    /// Records the thread of each write.
    #[derive(Clone, Default)]
    struct ThreadSink(Arc<Mutex<Vec<ThreadWrite>>>);

    impl Write for ThreadSink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let writes = &mut self.0.lock().unwrap();
            writes.push((std::thread::current().id(), buf.to_vec()));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_first_frame_is_written_before_start_returns_and_the_rest_by_the_writer() {
        let sink = ThreadSink::default();
        let output = Output::start_with_first(sink.clone(), body()).unwrap();
        let first = sink.0.lock().unwrap().clone();
        assert_eq!(first.len(), 1, "written before start_with_first returned");
        assert_eq!(first[0].0, std::thread::current().id());
        assert!(String::from_utf8_lossy(&first[0].1).contains("\"sequence\":1,"));
        assert!(output.enqueue(body(), FrameKind::Required, None));
        output.close();
        output.drained().await;
        let writes = sink.0.lock().unwrap().clone();
        assert_eq!(writes.len(), 2);
        assert_ne!(writes[1].0, std::thread::current().id());
        assert!(String::from_utf8_lossy(&writes[1].1).contains("\"sequence\":2,"));
    }

    #[tokio::test]
    async fn a_failed_first_write_fails_the_output() {
        let output = Output::start_with_first(Broken, body()).unwrap();
        output.failed().await;
        assert_eq!(output.failure().as_deref(), Some(messages::OUTPUT_WRITE));
        assert!(!output.enqueue(body(), FrameKind::Required, None));
    }

    #[tokio::test]
    async fn a_corked_batch_leaves_in_one_write() {
        let sink = CountingSink::default();
        let output = Output::start(sink.clone()).unwrap();
        while !output.lock().writer_parked {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        output.cork();
        for _ in 0..3 {
            assert!(output.enqueue(body(), FrameKind::Required, None));
        }
        output.uncork();
        output.drained().await;
        let (writes, bytes) = sink.0.lock().unwrap().clone();
        assert_eq!(writes, 1, "three corked frames, one write");
        assert_eq!(String::from_utf8(bytes).unwrap().lines().count(), 3);
    }

    #[tokio::test]
    async fn frames_are_sequenced_written_and_released() {
        let sink = Sink::default();
        let output = Output::start(sink.clone()).unwrap();
        let released = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let counter = released.clone();
            assert!(output.enqueue(
                body(),
                FrameKind::Required,
                Some(Box::new(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                }))
            ));
        }
        output.close();
        output.drained().await;
        assert_eq!(released.load(Ordering::SeqCst), 3);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let sequences: Vec<u64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["sequence"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(sequences, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn a_failing_writer_fails_the_output() {
        let output = Output::start(Broken).unwrap();
        output.enqueue(body(), FrameKind::Required, None);
        output.failed().await;
        assert_eq!(output.failure().as_deref(), Some(messages::OUTPUT_WRITE));
        assert!(!output.enqueue(body(), FrameKind::Required, None));
    }

    #[tokio::test]
    async fn droppable_frames_stop_at_the_bound_and_required_frames_at_the_ceiling() {
        // A writer that never returns keeps everything pending.
        struct Stuck;
        impl Write for Stuck {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(0)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let output = Output::start(Stuck).unwrap();
        // Frames taken by the writer still count as pending.
        for _ in 0..MAX_PENDING_RECORDS {
            assert!(output.enqueue(body(), FrameKind::Droppable, None));
        }
        assert!(!output.enqueue(body(), FrameKind::Droppable, None));
        assert!(output.failure().is_none());
        assert!(output.wait_for_room().is_some());
        // Required frames are queued whole beyond the bound (producers pause instead) ...
        let mut queued = 0;
        while output.enqueue(body(), FrameKind::Required, None) {
            queued += 1;
        }
        // ... up to the memory ceiling.
        assert_eq!(queued, CEILING_RECORDS - MAX_PENDING_RECORDS);
        assert_eq!(
            output.failure().as_deref(),
            Some(messages::OUTPUT_PENDING_BOUND)
        );
    }

    #[tokio::test]
    async fn large_frames_are_written_whole_in_order() {
        let sink = Sink::default();
        let output = Output::start(sink.clone()).unwrap();
        let big = "x".repeat(3 * WRITE_CHUNK + 17);
        for text in ["a", big.as_str(), "b", big.as_str()] {
            let body = encode_success("a", "m", &serde_json::json!({ "text": text }));
            assert!(output.enqueue(body, FrameKind::Required, None));
        }
        output.close();
        output.drained().await;
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let texts: Vec<String> = text
            .lines()
            .map(|l| {
                let frame: serde_json::Value = serde_json::from_str(l).unwrap();
                frame["result"]["text"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(texts, vec!["a", big.as_str(), "b", big.as_str()]);
    }

    #[tokio::test]
    async fn plain_lines_keep_their_bytes_and_take_no_sequence() {
        let sink = Sink::default();
        let output = Output::start(sink.clone()).unwrap();
        let released = Arc::new(AtomicUsize::new(0));
        let counter = released.clone();
        assert!(output.enqueue(body(), FrameKind::Required, None));
        assert!(output.enqueue_plain(
            Ok(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec()),
            FrameKind::Required,
            Some(Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })),
        ));
        assert!(output.enqueue(body(), FrameKind::Required, None));
        output.close();
        output.drained().await;
        assert_eq!(released.load(Ordering::SeqCst), 1);
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let sequences: Vec<u64> = [lines[0], lines[2]]
            .iter()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["sequence"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            sequences,
            vec![1, 2],
            "a plain line consumes no sequence number"
        );
    }
}
