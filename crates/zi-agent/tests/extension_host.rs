//! The session side of extension commands (docs/extensions.md#commands-over-rpc,
//! docs/rpc.md#commandinvoke, docs/rpc.md#the-state-snapshot): admission, the `extension_command`
//! activity and its `cancelling` phase, the return to idle, and custom messages appended while a
//! command owns the session.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use zi_agent::AgentSession;
use zi_agent::custom::{CustomDelivery, CustomMessageInput};
use zi_agent::extension::{CommandOutcome, ExtensionHost, InvokeError, LifecycleEvent};
use zi_os::sync::lock;
use zi_protocol::message::MessageContent;
use zi_protocol::request::Delivery;
use zi_protocol::results::CommandDescriptor;
use zi_protocol::state::{Activity, CommandPhase};

use crate::common::session::session_config;

/// A host with one command, `slow`, that ignores cancellation for a moment before it stops.
#[derive(Default)]
struct FakeHost {
    events: Mutex<Vec<LifecycleEvent>>,
}

impl ExtensionHost for FakeHost {
    fn commands(&self) -> Vec<CommandDescriptor> {
        vec![CommandDescriptor {
            name: "slow".into(),
            description: "waits".into(),
            argument_hint: None,
            extension_id: "fake".into(),
        }]
    }

    fn invoke(
        &self,
        name: &str,
        arguments: String,
        cancel: CancellationToken,
    ) -> Option<BoxFuture<'static, CommandOutcome>> {
        (name == "slow").then(|| {
            Box::pin(async move {
                tokio::select! {
                    () = cancel.cancelled() => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        Err("cancelled".to_string())
                    }
                    () = tokio::time::sleep(Duration::from_millis(100)) => Ok(Some(arguments)),
                }
            }) as BoxFuture<'static, CommandOutcome>
        })
    }

    fn notify(&self, event: LifecycleEvent) {
        lock(&self.events).push(event);
    }

    fn shutdown(&self) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

fn session(dir: &std::path::Path) -> AgentSession {
    AgentSession::new(session_config("extension-host-test", dir))
}

fn note(display: bool) -> CustomMessageInput {
    CustomMessageInput {
        custom_type: "example.note".into(),
        content: MessageContent::Text("note".into()),
        display,
        details: None,
    }
}

#[tokio::test]
async fn a_command_owns_the_session_until_it_settles() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session = session(dir.path());
    assert!(session.extension_commands().is_empty());
    assert!(matches!(
        session.invoke_command("slow", String::new()),
        Err(InvokeError::NotFound(m)) if m == "Command not found: slow"
    ));
    let host = Arc::new(FakeHost::default());
    session.set_extension_host(host.clone());
    assert_eq!(session.extension_commands().len(), 1);

    let running = session
        .invoke_command("slow", "done".into())
        .unwrap_or_else(|_| panic!("admitted"));
    assert_eq!(
        session.state().activity,
        Activity::ExtensionCommand {
            name: "slow".into(),
            phase: CommandPhase::Executing
        }
    );
    let prompt = session.prompt(Delivery::Direct, "hi".into()).err();
    assert_eq!(
        prompt.map(|e| e.to_string()).as_deref(),
        Some("Cannot prompt while an extension command is active")
    );
    let steer = session.prompt(Delivery::Steer, "hi".into()).err();
    assert_eq!(
        steer.map(|e| e.to_string()).as_deref(),
        Some("Cannot queue input while an extension command is active")
    );
    assert!(matches!(
        session.invoke_command("slow", String::new()),
        Err(InvokeError::Failed(_))
    ));
    // Appended messages wait for the command to settle.
    session
        .send_custom_message(note(true), CustomDelivery::Append)
        .unwrap_or_else(|e| panic!("{e}"));
    session
        .send_custom_message(note(false), CustomDelivery::Append)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(session.message_count(), 0);
    assert_eq!(running.await, Ok(Some("done".to_string())));
    assert_eq!(session.state().activity, Activity::Idle);
    assert_eq!(session.message_count(), 1);
}

#[tokio::test]
async fn interrupting_a_command_reports_cancelling_and_discards_its_messages() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let session = session(dir.path());
    session.set_extension_host(Arc::new(FakeHost::default()));
    let running = session
        .invoke_command("slow", String::new())
        .unwrap_or_else(|_| panic!("admitted"));
    let running = tokio::spawn(running);
    session
        .send_custom_message(note(true), CustomDelivery::Append)
        .unwrap_or_else(|e| panic!("{e}"));
    let aborting = {
        let session = session.clone();
        tokio::spawn(async move { session.abort().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        session.state().activity,
        Activity::ExtensionCommand {
            name: "slow".into(),
            phase: CommandPhase::Cancelling
        }
    );
    assert_eq!(
        aborting.await.ok().and_then(Result::ok),
        Some(()),
        "abort returns once the command settled"
    );
    assert_eq!(session.state().activity, Activity::Idle);
    assert_eq!(
        running
            .await
            .ok()
            .and_then(Result::err)
            .map(|e| e.to_string()),
        Some("cancelled".to_string())
    );
    assert_eq!(session.message_count(), 0);
}
