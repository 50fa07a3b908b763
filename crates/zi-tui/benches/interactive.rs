//! `cargo bench -p zi-tui --bench interactive`: the interactive view's costs (figures in
//! docs/performance.md).
//!
//! - **stream**: a 64 KiB answer as 4-byte deltas (16,384 `message_update` events) arriving over
//!   two seconds, applied and drawn the way the event loop does (a frame at most every 16 ms,
//!   whatever the number of deltas): frames per second, the slowest frame, and the CPU used
//!   (getrusage) as a share of one core.
//! - **keystroke**: one typed character to a repainted screen over a transcript of 200 items and
//!   the 64 KiB answer: median and p99.
//! - **resume**: 60 MiB of presentation messages (6,000 of 10 KiB) turned into transcript items
//!   and the last screen drawn (the journal file's own parsing is in zi-cli's `journal` bench).
//! - **retained**: the transcript's text bytes after the stream vs the bytes streamed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;
use zi_protocol::event::{AgentSessionEvent, AssistantMessageEvent};
use zi_protocol::message::{AgentMessage, MessageContent, UserMessage};
use zi_tui::composer::Composer;
use zi_tui::transcript::{Item, RenderOptions, Transcript};
use zi_tui::{FRAME_INTERVAL, Theme};

const WIDTH: u16 = 120;
const HEIGHT: u16 = 40;

fn options() -> RenderOptions {
    RenderOptions {
        width: WIDTH as usize,
        show_thinking: false,
        theme: Theme::new(false),
    }
}

fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn draw(terminal: &mut Terminal<TestBackend>, transcript: &mut Transcript, composer: &Composer) {
    terminal
        .draw(|frame| {
            let area = frame.area();
            let body = Rect::new(0, 0, area.width, area.height - 3);
            zi_tui::view::draw_transcript(frame, body, transcript, options(), 0);
            let layout = composer.layout(area.width as usize - 2);
            let rows: Vec<ratatui::text::Line<'_>> = layout
                .rows
                .iter()
                .map(|r| ratatui::text::Line::raw(r.as_str()))
                .collect();
            frame.render_widget(
                Paragraph::new(rows),
                Rect::new(0, area.height - 3, area.width, 2),
            );
        })
        .unwrap();
}

fn delta(text: &str) -> AgentSessionEvent {
    AgentSessionEvent::MessageUpdate {
        assistant_message_event: AssistantMessageEvent::TextDelta {
            content_index: 0,
            delta: text.to_string(),
        },
    }
}

/// Markdown-ish answer text: paragraphs, a list and code.
fn answer(bytes: usize) -> String {
    let unit = "Some **bold** words and `code` in a sentence that wraps. ";
    let mut text = String::new();
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(unit);
        n += 1;
        if n % 8 == 0 {
            text.push_str("\n\n- item one\n- item two\n\n```rust\nfn main() {}\n```\n\n");
        }
    }
    text.truncate(bytes);
    text
}

fn stream() {
    let text = answer(64 * 1024);
    let deltas: Vec<&str> = text
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    let mut transcript = Transcript::default();
    let composer = Composer::default();
    transcript.push(Item::User("write a long answer".to_string()));
    transcript.push(Item::Assistant {
        blocks: Vec::new(),
        streaming: true,
        error: None,
    });
    let span = Duration::from_secs(2);
    let per_batch = deltas.len() / 500; // 500 arrivals of ~33 deltas, every 4 ms
    let cpu_start = cpu_time();
    let start = Instant::now();
    let mut last_frame = Instant::now() - FRAME_INTERVAL;
    let mut frames = 0u32;
    let mut slowest = Duration::ZERO;
    let mut dirty = false;
    for (n, batch) in deltas.chunks(per_batch).enumerate() {
        let due = start + span * n as u32 / 500;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        for d in batch {
            transcript.apply(&delta(d));
        }
        dirty = true;
        if last_frame.elapsed() >= FRAME_INTERVAL {
            let t = Instant::now();
            draw(&mut terminal, &mut transcript, &composer);
            slowest = slowest.max(t.elapsed());
            last_frame = Instant::now();
            frames += 1;
            dirty = false;
        }
    }
    if dirty {
        draw(&mut terminal, &mut transcript, &composer);
        frames += 1;
    }
    let wall = start.elapsed();
    let cpu = cpu_time() - cpu_start;
    println!(
        "stream: {} deltas of 4 bytes in {:.2} s: {} frames ({:.1} fps), slowest frame {:.2} ms, CPU {:.0}% of one core",
        deltas.len(),
        wall.as_secs_f64(),
        frames,
        frames as f64 / wall.as_secs_f64(),
        slowest.as_secs_f64() * 1e3,
        cpu.as_secs_f64() / wall.as_secs_f64() * 100.0
    );
    let retained: usize = transcript.last_answer().map_or(0, |t| t.len());
    println!(
        "retained: {} bytes of answer text kept for {} bytes streamed in {} deltas",
        retained,
        text.len(),
        deltas.len()
    );
}

fn keystroke() {
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    let mut transcript = Transcript::default();
    for n in 0..200 {
        transcript.push(Item::User(format!("prompt {n}")));
        transcript.push(Item::Notice(answer(400)));
    }
    transcript.push(Item::Assistant {
        blocks: vec![zi_tui::transcript::AssistantBlock::Text(answer(64 * 1024))],
        streaming: false,
        error: None,
    });
    let mut composer = Composer::default();
    draw(&mut terminal, &mut transcript, &composer);
    let mut times = Vec::new();
    for n in 0..2000 {
        let t = Instant::now();
        composer.insert_char(if n % 10 == 9 { ' ' } else { 'x' });
        draw(&mut terminal, &mut transcript, &composer);
        times.push(t.elapsed());
    }
    times.sort();
    println!(
        "keystroke: typed character to repainted screen: median {:.3} ms, p99 {:.3} ms",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() * 99 / 100].as_secs_f64() * 1e3
    );
}

fn resume() {
    let body = answer(10 * 1024);
    let messages: Vec<AgentMessage> = (0..6000)
        .map(|_| {
            AgentMessage::User(UserMessage {
                content: MessageContent::Text(body.clone()),
                timestamp: Default::default(),
            })
        })
        .collect();
    let mut terminal = Terminal::new(TestBackend::new(WIDTH, HEIGHT)).unwrap();
    let composer = Composer::default();
    let t = Instant::now();
    let mut transcript = Transcript::default();
    transcript.load_messages(&messages);
    draw(&mut terminal, &mut transcript, &composer);
    println!(
        "resume: {} MiB in {} messages to the last screen: {:.1} ms",
        messages.len() * body.len() / (1024 * 1024),
        messages.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
}

fn main() {
    stream();
    keystroke();
    resume();
}
