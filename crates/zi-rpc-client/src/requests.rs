//! One convenience method per RPC method, each a typed [`Client::call`], and the prompt and
//! command helpers built on them.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::{
    AgentMessage, AwaitIdleParams, AwaitIdleResult, CommandDescriptor, CommandInvokeParams,
    CompletionResult, Delivery, EventMode, ImageContent, ImageMimeType, MAX_PAGES, MessagePage,
    MessagesParams, ModelList, ModelSelectParams, ModelSelection, OutcomePage, OutcomesParams,
    PromptParams, PromptResult, SessionState, SetEventsParams, SettingsScope, ThinkingLevel,
    ThinkingSelectParams, ThinkingSelection, methods,
};
use crate::{
    EntriesParams, EntryPage, ForkParams, ForkResult, SessionListPage, SessionListParams,
    SessionListScope,
};

/// Reads an image file for [`Client::prompt_with_images`]: its MIME type from the extension
/// (`png`, `jpg`/`jpeg`, `gif`, `webp`), its bytes base64-encoded (at most 5 MiB).
pub fn image_from_file(path: &std::path::Path) -> Result<ImageContent> {
    let usage = |problem: String| Error::Usage(format!("image {}: {problem}", path.display()));
    let mime_type = path
        .extension()
        .and_then(std::ffi::OsStr::to_str)
        .and_then(ImageMimeType::from_extension)
        .ok_or_else(|| usage("the extension must be png, jpg, jpeg, gif, or webp".into()))?;
    let bytes = std::fs::read(path).map_err(|error| usage(error.to_string()))?;
    ImageContent::from_bytes(&bytes, mime_type).map_err(|error| usage(error.to_string()))
}

impl Client {
    /// `session.get_state`: the state snapshot.
    pub async fn get_state(&self) -> Result<SessionState> {
        self.call::<methods::GetState>(()).await
    }

    /// `session.get_messages`: one page of at most `limit` messages from `start`.
    pub async fn get_messages(&self, start: u64, limit: u64) -> Result<MessagePage> {
        self.call::<methods::GetMessages>(Some(MessagesParams { start, limit }))
            .await
    }

    /// Pages `session.get_messages` from 0 until `nextStart` is null (at most 1,024 pages).
    pub async fn all_messages(&self) -> Result<Vec<AgentMessage>> {
        let mut out = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let page = self.get_messages(start, 100).await?;
            out.extend(page.messages);
            match page.next_start {
                Some(next) if next > start => start = next,
                Some(next) => {
                    return Err(Error::InvalidFrame(format!(
                        "message page nextStart {next} does not advance past {start}"
                    )));
                }
                None => return Ok(out),
            }
        }
        Err(Error::Usage("more than 1024 message pages".into()))
    }

    /// `session.get_outcomes`: one page of at most `limit` outcomes from `start`.
    pub async fn get_outcomes(&self, start: u64, limit: u64) -> Result<OutcomePage> {
        self.call::<methods::GetOutcomes>(Some(OutcomesParams { start, limit }))
            .await
    }

    /// Pages `session.get_outcomes` from 0 until `nextStart` is null (at most 1,024 pages).
    pub async fn all_outcomes(&self) -> Result<Vec<zi_protocol::event::SessionEntry>> {
        let mut out = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let page = self.get_outcomes(start, 100).await?;
            out.extend(page.outcomes);
            match page.next_start {
                Some(next) if next > start => start = next,
                Some(next) => {
                    return Err(Error::InvalidFrame(format!(
                        "outcome page nextStart {next} does not advance past {start}"
                    )));
                }
                None => return Ok(out),
            }
        }
        Err(Error::Usage("more than 1024 outcome pages".into()))
    }

    /// `session.prompt`: the input was admitted (not completed).
    pub async fn prompt(
        &self,
        delivery: Delivery,
        text: &str,
        completion_id: Option<&str>,
    ) -> Result<PromptResult> {
        self.prompt_with_images(delivery, text, completion_id, Vec::new())
            .await
    }

    /// `session.prompt` with images attached after the text (build each with
    /// [`ImageContent::new`], or [`image_from_file`] for a file).
    pub async fn prompt_with_images(
        &self,
        delivery: Delivery,
        text: &str,
        completion_id: Option<&str>,
        images: Vec<ImageContent>,
    ) -> Result<PromptResult> {
        self.call::<methods::Prompt>(PromptParams {
            delivery,
            text: text.to_string(),
            completion_id: completion_id.map(str::to_string),
            images,
        })
        .await
    }

    /// `session.interrupt` (the reserved slot): resolves once the interrupted activity settles.
    pub async fn interrupt(&self) -> Result<()> {
        self.call::<methods::Interrupt>(()).await.map(|_| ())
    }

    /// `session.await_idle`; with a completion id, the watch's settled observation.
    pub async fn await_idle(
        &self,
        completion_id: Option<&str>,
    ) -> Result<Option<CompletionResult>> {
        let params = completion_id.map(|id| AwaitIdleParams {
            completion_id: id.to_string(),
        });
        let watched = params.is_some();
        match self.call::<methods::AwaitIdle>(params).await? {
            AwaitIdleResult::Completion(result) if watched => Ok(Some(result)),
            AwaitIdleResult::Idle(_) if !watched => Ok(None),
            other => Err(Error::Decode {
                what: "session.await_idle".into(),
                message: format!("unexpected result {other:?}"),
            }),
        }
    }

    /// Follows a completion watch until its observed revision is at least `revision`, re-issuing
    /// the idle watch when input admitted after an observation advanced it.
    pub async fn await_completion(
        &self,
        completion_id: &str,
        revision: u64,
    ) -> Result<CompletionResult> {
        loop {
            let result = self
                .await_idle(Some(completion_id))
                .await?
                .ok_or_else(|| Error::Usage("await_idle returned no watch result".into()))?;
            if result.completion_revision >= revision {
                return Ok(result);
            }
        }
    }

    /// `connection.set_events`: the mode now in effect.
    pub async fn set_events(&self, mode: EventMode) -> Result<EventMode> {
        let result = self
            .call::<methods::SetEvents>(SetEventsParams { mode })
            .await?;
        Ok(result.mode)
    }

    /// `command.list`: the commands the session offers.
    pub async fn command_list(&self) -> Result<Vec<CommandDescriptor>> {
        let list = self.call::<methods::CommandList>(()).await?;
        Ok(list.commands)
    }

    /// `command.invoke`: the command's feedback message, if any.
    pub async fn command_invoke(&self, name: &str, arguments: &str) -> Result<Option<String>> {
        let result = self
            .call::<methods::CommandInvoke>(CommandInvokeParams {
                name: name.to_string(),
                arguments: arguments.to_string(),
            })
            .await?;
        Ok(result.message)
    }

    /// `model.list`: the catalog, with whether each model is configured.
    pub async fn model_list(&self) -> Result<ModelList> {
        self.call::<methods::ModelList>(()).await
    }

    /// `model.select`: selects `provider`/`id`.
    pub async fn model_select(&self, provider: &str, id: &str) -> Result<ModelSelection> {
        self.call::<methods::ModelSelect>(ModelSelectParams {
            provider: provider.to_string(),
            id: id.to_string(),
        })
        .await
    }

    /// `thinking.list`: the levels the selected model supports.
    pub async fn thinking_list(&self) -> Result<Vec<ThinkingLevel>> {
        let levels = self.call::<methods::ThinkingList>(()).await?;
        Ok(levels.levels)
    }

    /// `thinking.select`: selects `level`, saved in `scope`'s settings.
    pub async fn thinking_select(
        &self,
        level: ThinkingLevel,
        scope: SettingsScope,
    ) -> Result<ThinkingSelection> {
        self.call::<methods::ThinkingSelect>(ThinkingSelectParams { level, scope })
            .await
    }

    /// `session.list`: one page of the session catalog, newest first.
    pub async fn list_sessions(
        &self,
        start: u64,
        limit: u64,
        scope: SessionListScope,
    ) -> Result<SessionListPage> {
        self.call::<methods::ListSessions>(Some(SessionListParams {
            start,
            limit,
            scope,
        }))
        .await
    }

    /// `session.get_entries`: one page of the raw journal entries.
    pub async fn get_entries(&self, start: u64, limit: u64) -> Result<EntryPage> {
        self.call::<methods::GetEntries>(Some(EntriesParams { start, limit }))
            .await
    }

    /// Pages `session.get_entries` from 0 until `nextStart` is null (at most 1,024 pages).
    pub async fn all_entries(&self) -> Result<Vec<zi_protocol::event::SessionEntry>> {
        let mut out = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let page = self.get_entries(start, 100).await?;
            out.extend(page.entries);
            match page.next_start {
                Some(next) if next > start => start = next,
                Some(next) => {
                    return Err(Error::InvalidFrame(format!(
                        "entry page nextStart {next} does not advance past {start}"
                    )));
                }
                None => return Ok(out),
            }
        }
        Err(Error::Usage("more than 1024 entry pages".into()))
    }

    /// `session.fork`: writes a new journal up to and including `entry_id`; the running
    /// session is not switched.
    pub async fn fork(&self, entry_id: &str) -> Result<ForkResult> {
        self.call::<methods::Fork>(ForkParams {
            entry_id: entry_id.to_string(),
        })
        .await
    }

    /// `session.compact` (extension): compacts the context now, with an optional focus for the
    /// summary. An older zi answers `unknown_method`.
    pub async fn compact(
        &self,
        instructions: Option<&str>,
    ) -> Result<zi_protocol::results::CompactResult> {
        let params = instructions.map(|text| zi_protocol::params::CompactParams {
            instructions: Some(text.to_string()),
        });
        self.call::<methods::Compact>(params).await
    }

    /// `session.get_stats` (extension): usage and counts of the whole journal.
    pub async fn get_stats(&self) -> Result<zi_protocol::results::SessionStats> {
        self.call::<methods::GetStats>(()).await
    }

    /// Runs one direct prompt to completion and returns the last assistant message's text (an
    /// error when it stopped with `error` or `aborted`).
    pub async fn run_prompt(&self, text: &str) -> Result<String> {
        self.prompt(Delivery::Direct, text, None).await?;
        self.await_idle(None).await?;
        let messages = self.all_messages().await?;
        let last = messages
            .iter()
            .rev()
            .find_map(AgentMessage::as_assistant)
            .ok_or_else(|| {
                Error::Usage("RPC session completed without an assistant message".into())
            })?;
        use zi_protocol::message::StopReason;
        match last.stop_reason {
            StopReason::Error | StopReason::Aborted => {
                Err(Error::Usage(last.error_message.clone().unwrap_or_else(
                    || format!("RPC assistant stopped with {}", last.stop_reason.as_str()),
                )))
            }
            _ => Ok(last.text()),
        }
    }

    /// Invokes an extension command after checking that `command.list` admits its exact name.
    pub async fn run_command(&self, name: &str, arguments: &str) -> Result<Option<String>> {
        let commands = self.command_list().await?;
        if !commands.iter().any(|c| c.name == name) {
            return Err(Error::Usage(format!("Command not found: {name}")));
        }
        self.command_invoke(name, arguments).await
    }
}
