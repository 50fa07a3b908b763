//! The interactive session's state and what every input does to it. The app is driven by the
//! event loop in [`crate::run`]; it never blocks: work that waits (interrupt, compaction) runs
//! in a task whose result comes back as a [`UiEvent`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, MouseEventKind};
use tokio::sync::mpsc::UnboundedSender;
use zi_agent::AgentSession;
use zi_protocol::event::AgentSessionEvent;
use zi_protocol::request::Delivery;
use zi_protocol::state::WorkPlan;

use crate::composer::Composer;
use crate::history::History;
use crate::keys::{self, Action};
use crate::sessions::{SessionOpener, Switch};
use crate::status::{Activity, Status};
use crate::theme::Theme;
use crate::transcript::{Item, Transcript};

/// Messages loaded from the journal when a session is resumed (older ones stay in the journal).
pub const RESUME_TAIL: u64 = 2000;
/// How long the first Ctrl+C waits for the second.
const QUIT_WINDOW: Duration = Duration::from_secs(2);
/// Rows the mouse wheel scrolls.
const WHEEL_ROWS: usize = 3;

/// What the event loop hands the app.
pub enum UiEvent {
    /// An event of the session.
    Session(Box<AgentSessionEvent>),
    /// A key, mouse, paste or resize event of the terminal.
    Terminal(Event),
    /// A background action finished with something to say.
    Notice(Item),
    /// `/new` or `/resume`: every event of the replaced session is ahead of this one.
    Switched,
    /// An approval request or resolution for the inline prompt.
    Approval(crate::approval_prompt::ApprovalUpdate),
    /// The session's total cost from its whole journal: `(session id, dollars)`.
    Cost(String, f64),
    /// A `/login` sign-in's progress or end.
    Login(crate::login::LoginUpdate),
}

/// How `zi` starts the interactive mode.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where the prompt history lives (none: not persisted).
    pub agent_dir: Option<PathBuf>,
    /// `NO_COLOR`.
    pub no_color: bool,
    /// Prompts from the command line: the first is sent at start, the others follow it.
    pub initial_prompts: Vec<String>,
    /// Builds the sessions `/new` and `/resume` switch to (none: they are refused).
    pub sessions: Option<Arc<dyn SessionOpener>>,
    /// Answer the session's approval requests with the inline prompt (the operator's policy
    /// asks for some calls).
    pub approvals: bool,
    /// zi's warnings, shown as notices (start-up ones first).
    pub notices: Option<crate::NoticeFeed>,
    /// What `/login` and `/logout` need (none: they are refused).
    pub login: Option<crate::login::LoginSetup>,
}

/// The interactive view's state: the session, the transcript, the composer and whatever
/// overlay (picker, prompt, sign-in) is open.
pub struct App {
    pub(crate) session: AgentSession,
    pub(crate) theme: Theme,
    pub(crate) transcript: Transcript,
    pub(crate) composer: Composer,
    pub(crate) history: History,
    pub(crate) status: Status,
    /// Rows scrolled up from the bottom of the transcript.
    pub(crate) scroll: usize,
    pub(crate) show_thinking: bool,
    pub(crate) help: bool,
    /// The session's work plan, shown as a checklist pane above the composer (Ctrl+P toggles).
    pub(crate) plan: WorkPlan,
    pub(crate) show_plan: bool,
    /// The transcript viewport's height at the last frame (PageUp/PageDown step).
    pub(crate) viewport: usize,
    pub(crate) frame: u64,
    quit_armed: Option<Instant>,
    pub(crate) quit: bool,
    /// A second Esc within a run (or one while idle) clears the composer.
    escape_armed: bool,
    refresh_state: bool,
    /// Text for the clipboard, written (OSC 52) with the next frame.
    pub(crate) clipboard: Option<String>,
    /// Pending approval requests, the oldest shown as an inline prompt.
    pub(crate) approvals: crate::approval_prompt::Approvals,
    tasks: UnboundedSender<UiEvent>,
    /// The picker of `/resume`, `/model` or `/thinking`, while open (it takes the keys).
    pub(crate) picker: Option<crate::picker::OpenPicker>,
    /// The subscription to the session and a replacement on its way in.
    pub(crate) switch: Switch,
    /// What a replacement session is shown with (no initial prompts).
    options: Options,
    /// The cwd's paths for `@` completion.
    pub(crate) files: crate::completion::FileIndex,
    /// Background tasks and their status (a pane above the composer).
    pub(crate) background: crate::task_pane::BackgroundTasks,
    /// A `/login` sign-in in progress (it takes Enter and Esc).
    pub(crate) login: Option<crate::login::Running>,
}

impl App {
    /// The view of `session`; background actions report on `tasks`.
    pub fn new(session: AgentSession, options: &Options, tasks: UnboundedSender<UiEvent>) -> App {
        let mut app = App {
            theme: Theme::new(options.no_color),
            transcript: Transcript::default(),
            composer: Composer::default(),
            history: History::load(options.agent_dir.as_deref()),
            status: Status::default(),
            scroll: 0,
            show_thinking: false,
            help: false,
            plan: WorkPlan::default(),
            show_plan: true,
            viewport: 20,
            frame: 0,
            quit_armed: None,
            quit: false,
            escape_armed: false,
            refresh_state: true,
            clipboard: None,
            approvals: Default::default(),
            tasks,
            session,
            picker: None,
            files: Default::default(),
            background: Default::default(),
            login: None,
            switch: Switch::new(options.sessions.clone()),
            options: Options {
                initial_prompts: Vec::new(),
                ..options.clone()
            },
        };
        if options.approvals {
            crate::approval_prompt::attach(&app.session, &app.tasks);
        }
        app.load_journal();
        app.load_cost();
        app.refresh();
        app.plan = app.session.state().work_plan;
        for (n, prompt) in options.initial_prompts.iter().enumerate() {
            let delivery = if n == 0 {
                Delivery::Direct
            } else {
                Delivery::FollowUp
            };
            app.send(delivery, prompt.clone());
        }
        app
    }

    /// Shows `session` instead of the current one: a fresh view of it (transcript rebuilt from
    /// its journal, status, plan), keeping the subscription hold and the prompt history.
    pub(crate) fn adopt(&mut self, session: AgentSession) {
        let switch = std::mem::take(&mut self.switch);
        let fresh = App::new(session, &self.options, self.tasks.clone());
        *self = fresh;
        self.switch = switch;
    }

    /// Rebuilds the transcript from the session's messages (a resumed or continued session).
    fn load_journal(&mut self) {
        let total = self.session.message_count();
        let mut start = total.saturating_sub(RESUME_TAIL);
        if start > 0 {
            self.transcript.push(Item::Notice(format!(
                "{start} earlier messages are in the journal and not shown"
            )));
        }
        while start < total {
            match self.session.messages_page(start, total - start) {
                Ok(page) if !page.messages.is_empty() => {
                    self.transcript.load_messages(&page.messages);
                    start += page.messages.len() as u64;
                }
                Ok(_) => break,
                Err(error) => {
                    self.transcript.push(Item::Error(error.to_string()));
                    break;
                }
            }
        }
    }

    /// Totals the session's cost on a thread of its own: for a resumed journal that reads its
    /// whole compacted history from disk (about 100 ms for 60 MiB), which must not hold up the
    /// first frame. Live answers add their cost as they end; this total, taken again when a run
    /// settles, corrects anything counted twice or missed in between.
    fn load_cost(&self) {
        let session = self.session.clone();
        let tasks = self.tasks.clone();
        let spawned = std::thread::Builder::new()
            .name("zi-tui-cost".into())
            .spawn(move || {
                if let Ok(stats) = session.stats() {
                    let cost = stats.total.usage.cost.total;
                    let _ = tasks.send(UiEvent::Cost(session.session_id(), cost));
                }
            });
        if let Err(error) = spawned {
            tracing::warn!("could not total the session's cost: {error}");
        }
    }

    /// Takes the session snapshot into the status line if an event asked for it.
    pub(crate) fn refresh(&mut self) {
        if std::mem::take(&mut self.refresh_state) {
            let state = self.session.state();
            self.status.refresh(&state);
        }
    }

    /// Applies one event to the view.
    pub fn handle(&mut self, event: UiEvent) {
        match event {
            // Events of a replaced session still in the channel.
            UiEvent::Session(_) if self.switch.draining() => {}
            UiEvent::Session(event) => {
                if let AgentSessionEvent::WorkPlanChanged { plan } = event.as_ref() {
                    self.plan = plan.clone();
                }
                if matches!(event.as_ref(), AgentSessionEvent::AgentSettled) {
                    self.load_cost();
                }
                self.background.apply(&event);
                self.refresh_state |= self.status.apply(&event);
                self.transcript.apply(&event);
            }
            UiEvent::Terminal(event) => self.terminal(event),
            UiEvent::Notice(item) => self.transcript.push(item),
            UiEvent::Switched => crate::sessions::switched(self),
            // A total for a session this view no longer shows is dropped.
            UiEvent::Cost(session_id, cost) if session_id == self.session.session_id() => {
                self.status.cost = cost;
            }
            UiEvent::Cost(..) => {}
            UiEvent::Login(update) => crate::login::update(self, update),
            UiEvent::Approval(update) => {
                // A call's start (with its whole arguments) is ahead of its approval request.
                let transcript = &self.transcript;
                let said = self.approvals.apply(update, |id| transcript.tool_args(id));
                if let Some(item) = said {
                    self.transcript.push(item);
                }
            }
        }
    }

    fn terminal(&mut self, event: Event) {
        match event {
            Event::Key(key) => {
                if self.help {
                    self.help = false;
                    return;
                }
                let (taken, said) = self.approvals.key(&key, &self.session);
                if let Some(item) = said {
                    self.transcript.push(item);
                }
                if taken {
                    return;
                }
                if self.picker.is_some() {
                    if let Some(action) = keys::action(&key) {
                        crate::picker::key(self, action);
                    }
                    return;
                }
                if let Some(action) = keys::action(&key) {
                    self.act(action);
                }
            }
            Event::Paste(text) => {
                // One insertion, however large: bracketed paste delivers it whole.
                let text = text.replace("\r\n", "\n").replace('\r', "\n");
                self.composer.insert(&text);
            }
            Event::Mouse(mouse) => match mouse.kind {
                MouseEventKind::ScrollUp => self.scroll += WHEEL_ROWS,
                MouseEventKind::ScrollDown => self.scroll = self.scroll.saturating_sub(WHEEL_ROWS),
                _ => {}
            },
            Event::Resize(..) | Event::FocusGained | Event::FocusLost => {}
        }
    }

    fn act(&mut self, action: Action) {
        if crate::login::key(self, action) {
            return;
        }
        if action != Action::CtrlC {
            self.quit_armed = None;
            self.status.hint = None;
        }
        if action != Action::Escape {
            self.escape_armed = false;
        }
        match action {
            Action::Submit => self.submit(false),
            Action::FollowUp => self.submit(true),
            Action::Newline => self.composer.insert_char('\n'),
            Action::Insert('?') if self.composer.is_empty() => self.help = true,
            Action::Insert(c) => self.composer.insert_char(c),
            Action::Backspace => self.composer.backspace(),
            Action::Delete => self.composer.delete(),
            Action::Left => self.composer.left(),
            Action::Right => self.composer.right(),
            Action::Home => self.composer.home(),
            Action::End => self.composer.end(),
            Action::Up => {
                if !self.composer.up()
                    && let Some(text) = self.history.previous(self.composer.text())
                {
                    self.composer.set(text);
                }
            }
            Action::Down => {
                if !self.composer.down()
                    && let Some(text) = self.history.next()
                {
                    self.composer.set(text);
                }
            }
            Action::KillToStart => self.composer.kill_to_start(),
            Action::KillToEnd => self.composer.kill_to_end(),
            Action::DeleteWord => self.composer.delete_word(),
            Action::Escape => self.escape(),
            Action::CtrlC => {
                let armed = self.quit_armed.is_some_and(|at| at.elapsed() < QUIT_WINDOW);
                if armed {
                    self.quit = true;
                } else {
                    self.composer.take();
                    self.quit_armed = Some(Instant::now());
                    self.status.hint = Some("Press Ctrl+C again to quit".to_string());
                }
            }
            Action::CtrlD => {
                if self.composer.is_empty() {
                    self.quit = true;
                } else {
                    self.composer.delete();
                }
            }
            Action::ExpandTool => {
                self.transcript.toggle_last_tool();
            }
            Action::ToggleThinking => self.show_thinking = !self.show_thinking,
            Action::TogglePlan => self.show_plan = !self.show_plan,
            Action::PageUp => self.scroll += self.viewport.saturating_sub(2).max(1),
            Action::PageDown => {
                self.scroll = self
                    .scroll
                    .saturating_sub(self.viewport.saturating_sub(2).max(1))
            }
            Action::Complete => crate::completion::complete(self),
            Action::Redraw => {}
        }
    }

    pub(crate) fn busy(&self) -> bool {
        self.status.activity != Activity::Idle || self.session.is_streaming()
    }

    /// Esc: the first interrupts a run; a second one (or one while idle) clears the composer.
    fn escape(&mut self) {
        if self.busy() && !self.escape_armed {
            self.escape_armed = true;
            self.status.activity = Activity::Interrupting;
            let session = self.session.clone();
            let tasks = self.tasks.clone();
            tokio::spawn(async move {
                if let Err(error) = session.abort().await {
                    let _ = tasks.send(UiEvent::Notice(Item::Error(error.to_string())));
                }
            });
        } else {
            self.escape_armed = false;
            self.composer.take();
        }
    }

    fn submit(&mut self, follow_up: bool) {
        let text = self.composer.text().to_string();
        if text.trim().is_empty() {
            return;
        }
        if crate::slash::run(self, &text) {
            self.history.record(&text);
            self.composer.take();
            return;
        }
        let delivery = match (self.busy(), follow_up) {
            (false, _) => Delivery::Direct,
            (true, false) => Delivery::Steer,
            (true, true) => Delivery::FollowUp,
        };
        if self.send(delivery, text.clone()) {
            self.history.record(&text);
            self.composer.take();
        }
    }

    /// Hands a prompt to the session; false (and the reason in the transcript) if refused.
    fn send(&mut self, delivery: Delivery, text: String) -> bool {
        match self.session.prompt(delivery, text) {
            Ok(admission) => {
                // Dropping the admission releases the run.
                drop(admission);
                self.scroll = 0;
                self.background.prompt_sent();
                if delivery == Delivery::Direct {
                    self.status.activity = Activity::Thinking;
                }
                true
            }
            Err(error) => {
                self.transcript.push(Item::Error(error.to_string()));
                false
            }
        }
    }

    /// Whether something runs whose status animates (spinner, retry countdown).
    pub(crate) fn animating(&self) -> bool {
        self.status.activity != Activity::Idle
    }

    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    pub(crate) fn tasks(&self) -> &UnboundedSender<UiEvent> {
        &self.tasks
    }

    pub(crate) fn ask_refresh(&mut self) {
        self.refresh_state = true;
    }
}
