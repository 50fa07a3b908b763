//! zi driven by ACP clients nobody here wrote (docs/acp.md, "Testing"): acpx (npm, pinned) and
//! a scenario script on the official Python SDK (PyPI, pinned). Every message zi sends passes
//! through a tap and is checked against the ACP JSON Schema.

use std::time::Duration;

use serde_json::Value;
use zi_test_support::acp::clients::Session;
use zi_test_support::mock_llm::{Step, start_mock};

use super::{ZI, agent};

const RUN: Duration = Duration::from_secs(90);

fn summary(ran: &zi_test_support::acp::clients::Ran) -> Value {
    let line = ran.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "the client printed no summary (exit {:?})\nstdout:\n{}\nstderr:\n{}",
            ran.code, ran.stdout, ran.stderr
        )
    })
}

#[tokio::test]
async fn acpx_exec_streams_an_answer() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Text(vec!["Hello ".into(), "from zi".into()]));
    let ran = scene
        .acpx(
            &["--approve-all", "--format", "quiet", "exec", "say hello"],
            RUN,
        )
        .await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.contains("Hello from zi"), "{ran:?}");
    scene.check_schema();
}

#[tokio::test]
async fn python_sdk_streams_an_answer() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Text(vec!["Hel".into(), "lo".into()]));
    let ran = scene.python("stream", &[], RUN).await;
    let summary = summary(&ran);
    assert_eq!(ran.code, Some(0), "{summary}");
    assert_eq!(summary["text"], "Hello");
    scene.check_schema();
}

#[tokio::test]
async fn python_sdk_cancels_mid_stream() {
    let mock = start_mock().await;
    let agent = agent(&mock);
    let scene = Session::new(ZI.as_ref(), &agent, &["--model", "mock/m1"]);
    mock.push(Step::Hang(vec!["partial ".into()]));
    mock.push(Step::text("after the cancel"));
    let ran = scene.python("cancel", &[], RUN).await;
    let summary = summary(&ran);
    assert_eq!(ran.code, Some(0), "{summary}");
    assert_eq!(summary["stopReason"], "cancelled");
    assert_eq!(summary["updatesAfterResponse"], 0);
    scene.check_schema();
}
