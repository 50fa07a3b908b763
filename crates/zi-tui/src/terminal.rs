//! Taking the terminal over and always giving it back: raw mode, the alternate screen, bracketed
//! paste, mouse reporting and keyboard disambiguation are switched on by [`TerminalGuard::enter`]
//! and off by [`restore`], which runs when the guard drops (normal exit, an error, a signal that
//! ended the loop, unwinding) and from the panic hook before the panic message is printed.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    KeyboardEnhancementFlags, PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::{cursor, execute};

/// Whether the terminal is in zi's modes now.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Bytes of escape sequences gathered before they go to the terminal (a full 200×60 frame
/// with colours fits).
const SCREEN_BUFFER: usize = 64 * 1024;

/// The writer the screen is drawn through. crossterm writes each cell's text and style as its
/// own small write, so unbuffered a frame is thousands of system calls (4,016 for a 120×40
/// transcript); buffered it is one, sent when ratatui flushes at the end of the frame.
pub fn screen_writer(output: File) -> std::io::BufWriter<File> {
    std::io::BufWriter::with_capacity(SCREEN_BUFFER, output)
}

/// A handle on the terminal for [`restore`] (the panic hook has no other way to reach it).
static OUTPUT: OnceLock<Mutex<Option<File>>> = OnceLock::new();

/// Restores the terminal on drop, if it was the guard that took the terminal over.
pub struct TerminalGuard {
    owner: bool,
}

impl TerminalGuard {
    /// Switches the terminal behind `output` into zi's modes and installs the panic hook. While
    /// an earlier guard holds the terminal (the preview of a resumed journal stays up through
    /// the trust prompt and into the view), this one changes nothing and restores nothing, so
    /// the screen never flashes back to the shell between them and the keyboard modes are
    /// pushed once and popped once.
    pub fn enter(output: &File) -> std::io::Result<TerminalGuard> {
        if ACTIVE.load(Ordering::SeqCst) {
            return Ok(TerminalGuard { owner: false });
        }
        let mut handle = output.try_clone()?;
        let slot = OUTPUT.get_or_init(|| Mutex::new(None));
        if let Ok(mut slot) = slot.lock() {
            *slot = Some(output.try_clone()?);
        }
        install_panic_hook();
        crossterm::terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard { owner: true };
        execute!(
            handle,
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture,
            // Terminals that know the kitty protocol report Shift+Enter and a lone Esc
            // unambiguously; the others ignore the sequence.
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES),
            cursor::Hide,
        )?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if self.owner {
            restore();
        }
    }
}

/// Leaves zi's modes if they are on; safe to call any number of times from any thread. Errors
/// are ignored: the terminal may be gone (SIGHUP).
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    if let Some(slot) = OUTPUT.get()
        && let Ok(mut slot) = slot.lock()
        && let Some(out) = slot.as_mut()
    {
        let _ = execute!(
            out,
            PopKeyboardEnhancementFlags,
            DisableMouseCapture,
            DisableBracketedPaste,
            LeaveAlternateScreen,
            cursor::Show,
        );
        let _ = out.flush();
    }
    let _ = crossterm::terminal::disable_raw_mode();
}

fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let previous = std::panic::take_hook();
        let ui_thread = std::thread::current().id();
        std::panic::set_hook(Box::new(move |info| {
            // A panic in a task or worker thread does not end zi (it is caught and reported);
            // only the thread drawing the screen takes the terminal down with it.
            if std::thread::current().id() == ui_thread {
                restore();
            }
            previous(info);
        }));
    });
}
