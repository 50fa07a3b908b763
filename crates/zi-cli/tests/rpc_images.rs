//! Black-box tests of images in `session.prompt` (issue 14 point 1): the real binary against
//! the mock provider. Covers every decode error of `images` (exact messages, zi keeps serving,
//! nothing queued), a model without image input, the native request form of each of the four
//! provider APIs, queued images, message pages, context usage (1,200 tokens per image), the
//! format-2 journal (blob files) and `--continue`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use zi_test_support::dirs::{AgentDir, TempCwd, temp_cwd};
use zi_test_support::harness::Harness;
use zi_test_support::mock_llm::{MockLlm, Step, start_mock};
use zi_test_support::zi_command::ZiCommand;

const WAIT: Duration = Duration::from_secs(60);
const KEY: &str = "test-key-images";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really a png";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0 not really a jpeg";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn image(bytes: &[u8], mime_type: &str) -> Value {
    json!({"type": "image", "data": b64(bytes), "mimeType": mime_type})
}

/// The two images most tests attach: a PNG, then a JPEG.
fn two_images() -> Value {
    json!([image(PNG, "image/png"), image(JPEG, "image/jpeg")])
}

fn vision_models() -> Vec<Value> {
    vec![
        json!({"id": "vision", "input": ["text", "image"]}),
        json!({"id": "text-only"}),
    ]
}

fn agent_for(mock: &MockLlm, api: &str) -> AgentDir {
    AgentDir::new().models_for(mock, api, KEY, &vision_models())
}

async fn spawn(agent: &AgentDir, cwd: &Path, extra: &[&str]) -> Harness {
    ZiCommand::rpc(env!("CARGO_BIN_EXE_zi"), agent, cwd)
        .args(extra)
        .timeout(WAIT)
        .spawn_rpc()
        .await
}

/// The agent and working directories a spawned zi uses; kept alive for its lifetime.
struct Dirs {
    _agent: AgentDir,
    _cwd: zi_test_support::dirs::TempCwd,
}

/// A fresh mock serving [`vision_models`] over `api`, and `zi --no-session --model MODEL`.
async fn start_no_session(api: &str, model: &str) -> (MockLlm, Dirs, Harness) {
    let mock = start_mock().await;
    let agent = agent_for(&mock, api);
    let cwd = temp_cwd();
    let p = spawn(&agent, &cwd.path, &["--no-session", "--model", model]).await;
    let dirs = Dirs {
        _agent: agent,
        _cwd: cwd,
    };
    (mock, dirs, p)
}

fn seq(frame: &Value) -> u64 {
    frame["sequence"].as_u64().unwrap_or(0)
}

async fn prompt(p: &mut Harness, id: &str, delivery: &str, text: &str, images: Value) -> Value {
    p.request(
        id,
        "session.prompt",
        Some(json!({"delivery": delivery, "text": text, "images": images})),
    )
    .await
}

/// A direct prompt with images that must be admitted; waits for its run to settle.
async fn run_with_images(p: &mut Harness, id: &str, text: &str, images: Value) {
    let frame = prompt(p, id, "direct", text, images).await;
    assert_eq!(frame["ok"], true, "{frame}");
    p.event_after("agent_settled", seq(&frame)).await;
}

fn assert_invalid(frame: &Value, id: &str, message: &str) {
    assert_eq!(frame["type"], "protocol_error", "{frame}");
    assert_eq!(frame["code"], "invalid_request", "{frame}");
    assert_eq!(frame["id"], id, "{frame}");
    assert_eq!(frame["message"], message, "{frame}");
}

/// Zi's user message content for `text` and `images`: `[{type:"text", text}, ...images]`.
fn user_content(text: &str, images: &Value) -> Value {
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(images.as_array().cloned().unwrap_or_default());
    Value::Array(parts)
}

async fn all_messages(p: &mut Harness, id: &str) -> Vec<Value> {
    let page = p
        .request_ok(id, "session.get_messages", Some(json!({"limit": 100})))
        .await;
    assert_eq!(page["nextStart"], Value::Null, "{page}");
    page["messages"].as_array().cloned().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_image_is_invalid_request_with_its_exact_message_and_nothing_is_queued() {
    let (mock, _dirs, mut p) = start_no_session("openai-completions", "mock/vision").await;
    let png = image(PNG, "image/png");
    let max = 5 * 1024 * 1024;
    let cases = bad_images(&png, max);
    for (delivery, (images, message)) in ["direct", "steer", "follow_up", "continue"]
        .into_iter()
        .cycle()
        .zip(cases)
    {
        let id = format!("bad-{delivery}-{}", message.len());
        p.send(
            &id,
            "session.prompt",
            Some(json!({"delivery": delivery, "text": "x", "images": images})),
        )
        .await;
        let frame = p.protocol_error(Some(&id)).await;
        assert_invalid(&frame, &id, &message);
    }
    // The images key follows the other checks: a bad delivery is reported first.
    p.send(
        "order",
        "session.prompt",
        Some(json!({"delivery": "later", "text": "x", "images": 1})),
    )
    .await;
    let frame = p.protocol_error(Some("order")).await;
    assert_invalid(
        &frame,
        "order",
        "Prompt delivery must be direct, steer, follow_up, or continue",
    );

    // zi kept serving, and nothing was queued or run.
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["messageCount"], 0);
    assert!(mock.requests().is_empty());

    // The bounds themselves are accepted: 16 images, one of exactly 5 MiB.
    let mut sixteen = vec![image(&vec![2u8; max], "image/webp")];
    sixteen.extend((1..16).map(|n| image(&[n as u8; 3], "image/gif")));
    let frame = prompt(&mut p, "edge", "steer", "sixteen", Value::Array(sixteen)).await;
    assert_eq!(frame["ok"], true, "{frame}");
    let state = p.request_ok("s2", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"]["steering"][0]["images"]
            .as_array()
            .map(Vec::len),
        Some(16)
    );
    p.exit_by_eof().await;
}

/// Every bad `images` value with its exact message (`png` a good image, `max` the byte bound).
fn bad_images(png: &Value, max: usize) -> Vec<(Value, String)> {
    vec![
        (
            Value::Null,
            "Prompt images must be an array of at most 16 images".into(),
        ),
        (
            json!("QUJD"),
            "Prompt images must be an array of at most 16 images".into(),
        ),
        (
            Value::Array(vec![png.clone(); 17]),
            "Prompt images must be an array of at most 16 images".into(),
        ),
        (json!([png, 7]), "Prompt images[1] must be an object".into()),
        (
            json!([{"type": "image", "data": "QUJD", "mimeType": "image/png", "detail": "high"}]),
            "Prompt images[0] contains unknown fields".into(),
        ),
        (
            json!([{"type": "image", "data": "QUJD"}]),
            "Prompt images[0] is missing required fields".into(),
        ),
        (
            json!([{"type": "text", "data": "QUJD", "mimeType": "image/png"}]),
            "Prompt images[0] type must be image".into(),
        ),
        (
            json!([{"type": "image", "data": "QUJD", "mimeType": "image/svg+xml"}]),
            "Prompt images[0] mimeType must be image/png, image/jpeg, image/gif, or image/webp"
                .into(),
        ),
        (
            json!([{"type": "image", "data": "QUJD", "mimeType": "image/jpg"}]),
            "Prompt images[0] mimeType must be image/png, image/jpeg, image/gif, or image/webp"
                .into(),
        ),
        (
            json!([{"type": "image", "data": "QUJ", "mimeType": "image/png"}]),
            "Prompt images[0] data must be non-empty standard base64".into(),
        ),
        (
            json!([{"type": "image", "data": "QUJD\n", "mimeType": "image/png"}]),
            "Prompt images[0] data must be non-empty standard base64".into(),
        ),
        (
            json!([{"type": "image", "data": "QU-D", "mimeType": "image/png"}]),
            "Prompt images[0] data must be non-empty standard base64".into(),
        ),
        (
            json!([{"type": "image", "data": "", "mimeType": "image/gif"}]),
            "Prompt images[0] data must be non-empty standard base64".into(),
        ),
        (
            json!([{"type": "image", "data": 12, "mimeType": "image/gif"}]),
            "Prompt images[0] data must be non-empty standard base64".into(),
        ),
        (
            json!([image(&vec![1u8; max + 1], "image/webp")]),
            "Prompt images[0] data must decode to at most 5242880 bytes".into(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_image_input_refuses_images_in_every_delivery_and_queues_nothing() {
    let (mock, _dirs, mut p) = start_no_session("openai-completions", "mock/text-only").await;
    for delivery in ["direct", "steer", "follow_up", "continue"] {
        let id = format!("p-{delivery}");
        let frame = prompt(&mut p, &id, delivery, "look", two_images()).await;
        assert_eq!(frame["ok"], false, "{frame}");
        assert_eq!(
            frame["error"],
            json!({"code": "operation_failed", "message": "Model mock/text-only does not accept images"}),
        );
    }
    let state = p.request_ok("s", "session.get_state", None).await;
    assert_eq!(
        state["queuedInputs"],
        json!({"steering": [], "followUp": []})
    );
    assert_eq!(state["activity"], json!({"type": "idle"}));
    assert_eq!(state["messageCount"], 0);
    assert!(
        !p.frames()
            .iter()
            .any(|f| f["event"]["type"] == "queue_update" || f["event"]["type"] == "agent_start"),
        "nothing was queued or started"
    );
    // Without images the same model is prompted as in v1; an empty array is no images.
    mock.push(Step::text("fine"));
    let frame = prompt(&mut p, "plain", "direct", "hello", json!([])).await;
    assert_eq!(frame["ok"], true, "{frame}");
    p.event_after("agent_settled", seq(&frame)).await;
    assert_eq!(mock.requests().len(), 1);
    p.exit_by_eof().await;
}

// ---------------------------------------------------------------------------------------------
// Providers
// ---------------------------------------------------------------------------------------------

/// The first user message's content parts of a captured request body, in the API's own form.
fn vendor_user_parts(api: &str, body: &Value) -> Value {
    let user = |list: &Value| {
        list.as_array()
            .into_iter()
            .flatten()
            .find(|m| m["role"] == "user")
            .cloned()
            .unwrap_or_default()
    };
    match api {
        "anthropic-messages" => {
            let mut parts = user(&body["messages"])["content"].clone();
            // The last block of the last user message carries the cache breakpoint.
            for part in parts.as_array_mut().into_iter().flatten() {
                part.as_object_mut().map(|o| o.remove("cache_control"));
            }
            parts
        }
        "openai-completions" => user(&body["messages"])["content"].clone(),
        "openai-responses" => user(&body["input"])["content"].clone(),
        "google-generative-ai" => user(&body["contents"])["parts"].clone(),
        other => panic!("unknown api {other}"),
    }
}

/// What each API must receive for `look` + PNG + JPEG.
fn expected_vendor_parts(api: &str) -> Value {
    let data_url = |bytes: &[u8], mime: &str| format!("data:{mime};base64,{}", b64(bytes));
    match api {
        "anthropic-messages" => json!([
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": b64(JPEG)}},
        ]),
        "openai-completions" => json!([
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": data_url(PNG, "image/png")}},
            {"type": "image_url", "image_url": {"url": data_url(JPEG, "image/jpeg")}},
        ]),
        "openai-responses" => json!([
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": data_url(PNG, "image/png"), "detail": "auto"},
            {"type": "input_image", "image_url": data_url(JPEG, "image/jpeg"), "detail": "auto"},
        ]),
        "google-generative-ai" => json!([
            {"text": "look"},
            {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}},
            {"inlineData": {"mimeType": "image/jpeg", "data": b64(JPEG)}},
        ]),
        other => panic!("unknown api {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_reach_each_provider_api_in_its_native_form_and_appear_in_message_pages() {
    for api in [
        "anthropic-messages",
        "openai-completions",
        "openai-responses",
        "google-generative-ai",
    ] {
        let (mock, _dirs, mut p) = start_no_session(api, "mock/vision").await;
        mock.push(Step::text("I see two images"));
        let after = p.last_sequence();
        run_with_images(&mut p, "p1", "look", two_images()).await;

        let requests = mock.requests();
        assert_eq!(requests.len(), 1, "{api}");
        assert_eq!(
            vendor_user_parts(api, &requests[0].body),
            expected_vendor_parts(api),
            "{api}: {}",
            requests[0].body
        );
        // The user message as events and pages show it: text first, then the images inline.
        let expected = user_content("look", &two_images());
        let started = p
            .frames()
            .iter()
            .filter(|f| seq(f) > after && f["event"]["type"] == "message_end")
            .map(|f| f["event"]["message"].clone())
            .find(|m| m["role"] == "user")
            .unwrap_or_default();
        assert_eq!(started["content"], expected, "{api}");
        let messages = all_messages(&mut p, "m").await;
        assert_eq!(messages.len(), 2, "{api}");
        assert_eq!(messages[0]["content"], expected, "{api}");
        p.close_stdin().await;
        assert_eq!(p.wait_exit(WAIT).await.code, Some(0), "{api}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_image_counts_1200_tokens_in_context_usage() {
    // With a provider failure as the last assistant message, everything is estimated: the
    // same prompt with two images must estimate exactly 2,400 tokens more.
    let mut tokens = Vec::new();
    for images in [json!([]), two_images()] {
        let (mock, _dirs, mut p) = start_no_session("openai-completions", "mock/vision").await;
        mock.push(Step::HttpError {
            status: 400,
            message: "refused".into(),
        });
        run_with_images(&mut p, "p", "look at these", images).await;
        let state = p.request_ok("s", "session.get_state", None).await;
        assert_eq!(state["contextUsage"]["type"], "estimated", "{state}");
        tokens.push(state["contextUsage"]["tokens"].as_u64().unwrap_or(0));
        p.exit_by_eof().await;
    }
    assert_eq!(tokens[1], tokens[0] + 2400, "{tokens:?}");
}

// ---------------------------------------------------------------------------------------------
// Queues, journal and --continue
// ---------------------------------------------------------------------------------------------

fn journal_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn only_journal(dir: &Path) -> PathBuf {
    let journals: Vec<PathBuf> = zi_test_support::dirs::all_files(dir)
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    assert_eq!(journals.len(), 1, "{journals:?}");
    journals[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_images_are_listed_journaled_as_blobs_and_survive_continue() {
    let mock = start_mock().await;
    let agent = agent_for(&mock, "anthropic-messages");
    let cwd = temp_cwd();
    let sessions = temp_cwd();
    let dir_arg = sessions.path.display().to_string();
    let mut p = spawn(
        &agent,
        &cwd.path,
        &["--session-dir", &dir_arg, "--model", "mock/vision"],
    )
    .await;

    // A steer while idle stays queued, images and bytes listed (text + MIME type + base64).
    let gif = json!([image(b"GIF89a tiny", "image/gif")]);
    let frame = prompt(&mut p, "q", "steer", "and this one", gif.clone()).await;
    assert_eq!(frame["ok"], true, "{frame}");
    let state = p.request_ok("s", "session.get_state", None).await;
    let queued = &state["queuedInputs"]["steering"][0];
    assert_eq!(queued["images"], gif, "{state}");
    let data_len = b64(b"GIF89a tiny").len() as u64;
    assert_eq!(
        queued["bytes"],
        "and this one".len() as u64 + "image/gif".len() as u64 + data_len
    );

    // The direct prompt's run delivers the steer before the first provider call.
    mock.push(Step::text("seen"));
    run_with_images(&mut p, "p1", "look", two_images()).await;
    let first = &mock.requests()[0].body;
    let users: Vec<&Value> = first["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users.len(), 2, "{first}");
    assert_eq!(
        users[1]["content"][1]["source"]["media_type"], "image/gif",
        "{first}"
    );
    let before = all_messages(&mut p, "m1").await;
    assert_eq!(before.len(), 3);
    assert_eq!(before[0]["content"], user_content("look", &two_images()));
    assert_eq!(before[1]["content"], user_content("and this one", &gif));
    p.exit_by_eof().await;

    let (journal, blob_dir) = the_images_are_blobs(&sessions);

    // `--continue` restores the images inline, and the provider sees them again.
    let mut c = spawn(
        &agent,
        &cwd.path,
        &["--session-dir", &dir_arg, "-c", "--model", "mock/vision"],
    )
    .await;
    assert_eq!(all_messages(&mut c, "m2").await, before);
    mock.push(Step::text("still seen"));
    run_with_images(&mut c, "p2", "again", json!([image(PNG, "image/png")])).await;
    let body = &mock.requests()[1].body;
    assert_eq!(
        body["messages"][0]["content"][1]["source"]["data"],
        b64(PNG),
        "{body}"
    );
    let messages = all_messages(&mut c, "m3").await;
    assert_eq!(
        messages[3]["content"],
        user_content("again", &json!([image(PNG, "image/png")]))
    );
    c.exit_by_eof().await;
    // The same PNG again added no blob file.
    assert_eq!(zi_test_support::dirs::all_files(&blob_dir).len(), 3);
    assert_eq!(only_journal(&sessions.path), journal);
}

/// Format 2: the JSONL holds blob references, the blob files (private) hold the decoded bytes;
/// returns the journal and its blob directory.
fn the_images_are_blobs(sessions: &TempCwd) -> (PathBuf, PathBuf) {
    let journal = only_journal(&sessions.path);
    let text = std::fs::read_to_string(&journal).unwrap_or_default();
    assert!(!text.contains(&b64(PNG)), "no inline image data: {text}");
    let lines = journal_lines(&journal);
    assert_eq!(lines[0]["version"], 2);
    let user_line = lines
        .iter()
        .find(|line| line["type"] == "message" && line["message"]["role"] == "user")
        .cloned()
        .unwrap_or_default();
    let parts = &user_line["message"]["content"];
    assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
    let blob_dir = journal.with_extension("blobs");
    for (index, (bytes, mime)) in [(PNG, "image/png"), (JPEG, "image/jpeg")]
        .into_iter()
        .enumerate()
    {
        let part = &parts[index + 1];
        let keys: Vec<&String> = part
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["type", "mimeType", "blob"], "{part}");
        assert_eq!(part["mimeType"], mime);
        assert_eq!(part["blob"]["bytes"], bytes.len());
        let sha = part["blob"]["sha256"].as_str().unwrap_or_default();
        assert!(
            sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{part}"
        );
        assert_eq!(std::fs::read(blob_dir.join(sha)).unwrap_or_default(), bytes);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |path: &Path| {
            std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&blob_dir), 0o700);
        for blob in zi_test_support::dirs::all_files(&blob_dir) {
            assert_eq!(mode(&blob), 0o600, "{}", blob.display());
        }
    }
    (journal, blob_dir)
}
