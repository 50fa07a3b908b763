//! Framing (docs/rpc.md#framing): CRLF, split UTF-8, empty and unterminated lines, invalid UTF-8
//! and the 16 MiB record bound.

use super::*;

const MIB16: usize = 16 * 1024 * 1024;

const FRAMING_UTF8: &str = "RPC input must be valid UTF-8";
const FRAMING_OVERSIZED: &str = "RPC input records cannot exceed 16777216 bytes";

// ---------------------------------------------------------------------------------------------
// 2. Framing (docs/rpc.md#framing)
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_accepts_crlf_and_reassembles_split_utf8() {
    let (_env, mut p) = Env::started_without_model().await;

    // CRLF.
    p.send_raw(b"{\"version\":1,\"id\":\"crlf\",\"method\":\"session.get_state\"}\r\n")
        .await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "crlf", "session.get_state");

    // A two-byte character split across writes.
    let record = line("split-\u{e9}", "session.get_state", None);
    let at = record
        .iter()
        .position(|&b| b == 0xc3)
        .expect("the record holds é")
        + 1;
    p.send_raw(&record[..at]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    p.send_raw(&record[at..]).await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "split-\u{e9}", "session.get_state");

    // A four-byte character split in three writes.
    let record = line("emoji-\u{1f600}", "session.get_state", None);
    let start = record.iter().position(|&b| b == 0xf0).expect("emoji");
    p.send_raw(&record[..start + 1]).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    p.send_raw(&record[start + 1..start + 3]).await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    p.send_raw(&record[start + 3..]).await;
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "emoji-\u{1f600}", "session.get_state");

    p.exit_by_eof().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_empty_lines_are_invalid_json_and_recoverable() {
    let (_env, mut p) = Env::started_without_model().await;

    p.send_raw(b"\n").await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, "empty line");

    p.send_raw(b"\r\n").await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, "CR-only line");

    // Several empty lines in one write: one error each, in order.
    let mut bytes = b"\n\n".to_vec();
    bytes.extend(line("after", "session.get_state", None));
    p.send_raw(&bytes).await;
    for n in 0..2 {
        let frame = next_reply(&mut p).await;
        assert_protocol_error(&frame, "invalid_json", INVALID_JSON, None, &format!("#{n}"));
    }
    assert_success(&next_reply(&mut p).await, "after", "session.get_state");

    let exited = p.exit_by_eof().await;
    assert_eq!(exited.stderr, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_unterminated_final_line_is_processed_at_eof() {
    let (_env, mut p) = Env::started_without_model().await;
    p.send_raw(b"{\"version\":1,\"id\":\"eof\",\"method\":\"session.get_state\"}")
        .await;
    // Nothing happens before EOF ...
    assert!(
        p.next_frame_within(Duration::from_millis(150))
            .await
            .is_none()
    );
    // ... and the record is admitted at EOF.
    p.close_stdin().await;
    let frame = p.response("eof").await;
    assert_success(&frame, "eof", "session.get_state");
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(0));
    assert_eq!(exited.stderr, "");
    assert_eq!(sequences(&p), [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_invalid_utf8_is_fatal_after_one_error() {
    let (_env, mut p) = Env::started_without_model().await;

    // A valid record, then invalid bytes, then another record, all in one write.
    let mut bytes = line("before", "session.get_state", None);
    bytes.extend_from_slice(
        b"{\"version\":1,\"id\":\"bad\xff\",\"method\":\"session.get_state\"}\n",
    );
    bytes.extend(line("after", "session.get_state", None));
    p.send_raw(&bytes).await;

    // Records before the failure are admitted (records are processed one by one).
    let frame = next_reply(&mut p).await;
    assert_success(&frame, "before", "session.get_state");
    let frame = next_reply(&mut p).await;
    assert_protocol_error(&frame, "invalid_framing", FRAMING_UTF8, None, "0xff");

    // Later input is ignored (a broken pipe is fine).
    p.send_raw(&line("later", "session.get_state", None)).await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_UTF8}\n"));

    assert_eq!(
        count_frames(&p, |f| f["type"] == "protocol_error"),
        1,
        "exactly one protocol_error: {:?}",
        p.frames()
    );
    assert_eq!(
        count_frames(&p, |f| f["type"] == "response"),
        1,
        "nothing after the framing error is answered: {:?}",
        p.frames()
    );
    assert_eq!(sequences(&p), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_incomplete_utf8_at_eof_is_fatal() {
    let (_env, mut p) = Env::started_without_model().await;
    p.send_raw(b"{\"version\":1,\"id\":\"x\",\"method\":\"session.get_state\"}\n\xc3")
        .await;
    assert_success(&next_reply(&mut p).await, "x", "session.get_state");
    p.close_stdin().await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_UTF8,
        None,
        "cut-off sequence",
    );
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_UTF8}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_oversized_record_is_fatal() {
    let (_env, mut p) = Env::started_without_model().await;
    // 16 MiB + 1 bytes and no newline: the decoder fails without waiting for the LF.
    let bytes = vec![b' '; MIB16 + 1];
    p.send_raw(&bytes).await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_OVERSIZED,
        None,
        "16 MiB + 1",
    );
    p.send_raw(&line("later", "session.get_state", None)).await;
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
    assert_eq!(exited.stderr, format!("{FRAMING_OVERSIZED}\n"));
    assert_eq!(sequences(&p), [1, 2], "{:?}", p.frames());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_oversized_terminated_record_is_fatal() {
    let (_env, mut p) = Env::started_without_model().await;
    // 16 MiB of content plus a CR: the CR counts, so this record is one byte too long.
    let mut record = br#"{"version":1,"id":"big","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 1, b' ');
    record.push(b'}');
    record.extend_from_slice(b"\r\n");
    p.send_raw(&record).await;
    let frame = next_reply(&mut p).await;
    assert_protocol_error(
        &frame,
        "invalid_framing",
        FRAMING_OVERSIZED,
        None,
        "CR counts",
    );
    let exited = p.wait_exit(WAIT).await;
    assert_eq!(exited.code, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_record_of_exactly_16_mib_is_accepted() {
    let (_env, mut p) = Env::started_without_model().await;
    let mut record = br#"{"version":1,"id":"big","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 1, b' ');
    record.push(b'}');
    assert_eq!(record.len(), MIB16);
    record.push(b'\n');
    p.send_raw(&record).await;
    assert_success(&next_reply(&mut p).await, "big", "session.get_state");

    // The same size including a trailing CR is also exactly 16 MiB.
    let mut record = br#"{"version":1,"id":"big-cr","method":"session.get_state""#.to_vec();
    record.resize(MIB16 - 2, b' ');
    record.push(b'}');
    record.extend_from_slice(b"\r\n");
    p.send_raw(&record).await;
    assert_success(&next_reply(&mut p).await, "big-cr", "session.get_state");

    let after = p.request("after", "session.get_state", None).await;
    assert_success(&after, "after", "session.get_state");
    p.exit_by_eof().await;
}
