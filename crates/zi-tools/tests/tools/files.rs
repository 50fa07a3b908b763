//! read, write and edit: error codes, limits and boundaries (docs/tools.md).

use super::*;

// ---------------------------------------------------------------------------------------------
// read
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn read_error_codes() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    assert_error(
        &call(&read, json!({"path": "missing.txt"})).await,
        "not_found",
    );
    std::fs::create_dir(f.root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(&call(&read, json!({"path": "dir"})).await, "not_file");
    let big = std::fs::File::create(f.root.join("big.bin")).unwrap_or_else(|e| panic!("{e}"));
    big.set_len(16 * 1024 * 1024 + 1)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(&call(&read, json!({"path": "big.bin"})).await, "too_large");
    write_file(&f.root.join("three.txt"), "a\nb\nc\n");
    assert_error(
        &call(&read, json!({"path": "three.txt", "offset": 4})).await,
        "invalid_offset",
    );
    write_file(&f.root.join("blob.bin"), b"\x89PNG\0\0\x01binary");
    assert_error(
        &call(&read, json!({"path": "blob.bin"})).await,
        "unreadable",
    );
    if !is_root() {
        let secret = f.root.join("secret.txt");
        write_file(&secret, "x");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(
            &call(&read, json!({"path": "secret.txt"})).await,
            "permission_denied",
        );
    }
}

#[tokio::test]
async fn read_exactly_sixteen_mib_is_allowed() {
    let f = fixture();
    let file = std::fs::File::create(f.root.join("sixteen.txt")).unwrap_or_else(|e| panic!("{e}"));
    drop(file);
    write_file(&f.root.join("sixteen.txt"), "x\n".repeat(8 * 1024 * 1024));
    let out = call(
        &ReadTool::new(f.env.clone()),
        json!({"path": "sixteen.txt"}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert!(
        text(&out).ends_with("\n\n[Showing lines 1-2000 of 8388608. Use offset=2001 to continue.]")
    );
}

#[tokio::test]
async fn read_offsets_limits_and_line_boundary() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    let lines: String = (1..=2000).map(|i| format!("line {i}\n")).collect();
    write_file(&f.root.join("2000.txt"), &lines);
    let out = call(&read, json!({"path": "2000.txt"})).await;
    assert!(!out.is_error);
    assert!(
        text(&out).ends_with("line 2000"),
        "exactly 2,000 lines are shown whole"
    );
    assert_eq!(detail(&out, "truncated"), json!(false));

    write_file(&f.root.join("2001.txt"), format!("{lines}line 2001\n"));
    let out = call(&read, json!({"path": "2001.txt"})).await;
    assert!(
        text(&out)
            .ends_with("line 2000\n\n[Showing lines 1-2000 of 2001. Use offset=2001 to continue.]")
    );
    assert_eq!(detail(&out, "truncatedBy"), json!("lines"));
    let out = call(&read, json!({"path": "2001.txt", "offset": 2001})).await;
    assert_eq!(text(&out), "line 2001");

    let out = call(&read, json!({"path": "2001.txt", "offset": 10, "limit": 2})).await;
    assert_eq!(
        text(&out),
        "line 10\nline 11\n\n[Showing lines 10-11 of 2001. Use offset=12 to continue.]"
    );
    // An empty file reads as empty text at offset 1.
    write_file(&f.root.join("empty.txt"), "");
    assert_eq!(text(&call(&read, json!({"path": "empty.txt"})).await), "");
}

#[tokio::test]
async fn read_byte_limit_exact_and_one_over() {
    let f = fixture();
    let read = ReadTool::new(f.env.clone());
    // Two lines joined by one newline: 25,599 + 1 + 25,600 = 51,200 bytes.
    let exact = format!("{}\n{}\n", "a".repeat(25_599), "b".repeat(25_600));
    write_file(&f.root.join("exact.txt"), &exact);
    let out = call(&read, json!({"path": "exact.txt"})).await;
    assert_eq!(text(&out).len(), 51_200);
    assert_eq!(detail(&out, "truncated"), json!(false));

    let over = format!("{}\n{}\n", "a".repeat(25_600), "b".repeat(25_600));
    write_file(&f.root.join("over.txt"), &over);
    let out = call(&read, json!({"path": "over.txt"})).await;
    assert_eq!(
        text(&out),
        format!(
            "{}\n\n[Showing lines 1-1 of 2. Use offset=2 to continue.]",
            "a".repeat(25_600)
        )
    );
    assert_eq!(detail(&out, "truncatedBy"), json!("bytes"));

    // A single line over the limit.
    write_file(
        &f.root.join("long.txt"),
        format!("short\n{}\n", "z".repeat(51_201)),
    );
    let out = call(&read, json!({"path": "long.txt", "offset": 2})).await;
    assert_eq!(
        text(&out),
        "[Line 2 exceeds the 51200 byte limit. Use bash to inspect a bounded byte range.]"
    );
    assert!(!out.is_error);
    // A line of exactly 51,200 bytes is shown.
    write_file(&f.root.join("fits.txt"), "y".repeat(51_200));
    assert_eq!(
        text(&call(&read, json!({"path": "fits.txt"})).await).len(),
        51_200
    );
}

// ---------------------------------------------------------------------------------------------
// write
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn write_creates_parents_and_reports_bytes() {
    let f = fixture();
    let write = WriteTool::new(f.env.clone());
    let out = call(&write, json!({"path": "a/b/c.txt", "content": "héllo"})).await;
    assert!(!out.is_error);
    assert_eq!(text(&out), "Successfully wrote 6 bytes to a/b/c.txt");
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap_or_default(),
        "héllo"
    );
    let out = call(&write, json!({"path": "a/b/c.txt", "content": "new"})).await;
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read_to_string(f.root.join("a/b/c.txt")).unwrap_or_default(),
        "new"
    );
}

#[tokio::test]
async fn write_error_codes_and_size_boundary() {
    let f = fixture();
    let write = WriteTool::new(f.env.clone());
    assert_error(
        &call(&write, json!({"path": "", "content": "x"})).await,
        "invalid_path",
    );
    assert_error(
        &call(&write, json!({"path": "a\u{0}b", "content": "x"})).await,
        "invalid_path",
    );
    std::fs::create_dir(f.root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&write, json!({"path": "dir", "content": "x"})).await,
        "not_file",
    );
    let limit = 8 * 1024 * 1024;
    let out = call(
        &write,
        json!({"path": "max.txt", "content": "x".repeat(limit)}),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_error(
        &call(
            &write,
            json!({"path": "over.txt", "content": "x".repeat(limit + 1)}),
        )
        .await,
        "too_large",
    );
    write_file(&f.root.join("file"), "x");
    assert_error(
        &call(&write, json!({"path": "file/child.txt", "content": "x"})).await,
        "unwritable",
    );
    if !is_root() {
        use std::os::unix::fs::PermissionsExt as _;
        let locked = f.root.join("locked");
        std::fs::create_dir(&locked).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_error(
            &call(&write, json!({"path": "locked/x.txt", "content": "x"})).await,
            "permission_denied",
        );
    }
}

#[tokio::test]
async fn concurrent_writes_and_edits_to_one_file_are_serialised() {
    let f = fixture();
    write_file(&f.root.join("shared.txt"), "counter: 0\n");
    let edit = Arc::new(EditTool::new(f.env.clone()));
    // Ten edits, each matching the value the previous one wrote: they only all succeed when
    // every edit sees the previous one's result.
    let mut outputs = Vec::new();
    for i in 0..10 {
        let edit = edit.clone();
        outputs.push(tokio::spawn(async move {
            loop {
                let out = call(
                    edit.as_ref(),
                    json!({"path": "shared.txt", "edits": [{"oldText": format!("counter: {i}\n"), "newText": format!("counter: {}\n", i + 1)}]}),
                )
                .await;
                if !out.is_error {
                    return out;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    for output in outputs {
        let out = output.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(!out.is_error);
    }
    assert_eq!(
        std::fs::read_to_string(f.root.join("shared.txt")).unwrap_or_default(),
        "counter: 10\n"
    );
}

// ---------------------------------------------------------------------------------------------
// edit
// ---------------------------------------------------------------------------------------------

fn edit_args(path: &str, edits: &[(&str, &str)]) -> Value {
    json!({"path": path, "edits": edits.iter().map(|(o, n)| json!({"oldText": o, "newText": n})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn edit_replaces_and_reports_a_diff() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(&f.root.join("src.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n");
    let out = call(
        &edit,
        edit_args(
            "src.rs",
            &[("fn a() {}", "fn a() { 1 }"), ("fn c() {}", "fn c() { 3 }")],
        ),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(text(&out), "Successfully replaced 2 block(s) in src.rs");
    assert_eq!(
        std::fs::read_to_string(f.root.join("src.rs")).unwrap_or_default(),
        "fn a() { 1 }\nfn b() {}\nfn c() { 3 }\n"
    );
    assert_eq!(detail(&out, "additions"), json!(2));
    assert_eq!(detail(&out, "deletions"), json!(2));
    assert_eq!(detail(&out, "firstChangedLine"), json!(1));
    let diff = detail(&out, "diff");
    let diff = diff.as_str().unwrap_or_default();
    assert!(
        diff.starts_with("--- a/src.rs\n+++ b/src.rs\n@@ -1,3 +1,3 @@\n"),
        "{diff}"
    );
    assert!(diff.contains("-fn a() {}\n+fn a() { 1 }\n"), "{diff}");
}

#[tokio::test]
async fn edit_error_codes() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(&f.root.join("f.txt"), "one two one\nthree\n");
    assert_error(
        &call(&edit, edit_args("missing.txt", &[("a", "b")])).await,
        "not_found",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("four", "4")])).await,
        "match_missing",
    );
    let out = call(&edit, edit_args("f.txt", &[("one", "1")])).await;
    assert_error(&out, "match_ambiguous");
    // Overlapping occurrences of the same text are ambiguous too.
    write_file(&f.root.join("aaa.txt"), "aaa");
    assert_error(
        &call(&edit, edit_args("aaa.txt", &[("aa", "b")])).await,
        "match_ambiguous",
    );
    assert_error(
        &call(
            &edit,
            edit_args("f.txt", &[("one two", "x"), ("two one", "y")]),
        )
        .await,
        "overlap",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("three", "three")])).await,
        "no_change",
    );
    assert_error(
        &call(&edit, edit_args("f.txt", &[("", "x")])).await,
        "invalid_edit",
    );
    std::fs::create_dir(f.root.join("d")).unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&edit, edit_args("d", &[("a", "b")])).await,
        "not_file",
    );
    // Nothing was written by the failures.
    assert_eq!(
        std::fs::read_to_string(f.root.join("f.txt")).unwrap_or_default(),
        "one two one\nthree\n"
    );
    // Adjacent (touching) edits do not overlap.
    let out = call(
        &edit,
        edit_args("f.txt", &[("one two ", "1 2 "), ("one\n", "1\n")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(f.root.join("f.txt")).unwrap_or_default(),
        "1 2 1\nthree\n"
    );
}

#[tokio::test]
async fn edit_limits() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    let body: String = (0..65).map(|i| format!("line {i:03}\n")).collect();
    write_file(&f.root.join("many.txt"), &body);
    let pairs: Vec<(String, String)> = (0..64)
        .map(|i| (format!("line {i:03}\n"), format!("L{i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let out = call(&edit, edit_args("many.txt", &refs)).await;
    assert!(!out.is_error, "64 edits are allowed: {}", text(&out));
    let big = std::fs::File::create(f.root.join("big.txt")).unwrap_or_else(|e| panic!("{e}"));
    big.set_len(16 * 1024 * 1024 + 1)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &call(&edit, edit_args("big.txt", &[("a", "b")])).await,
        "too_large",
    );
    let huge = "x".repeat(8 * 1024 * 1024);
    assert_error(
        &call(&edit, edit_args("many.txt", &[("L1", &huge)])).await,
        "too_large",
    );
}

#[tokio::test]
async fn edit_preserves_crlf_and_bom() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    write_file(
        &f.root.join("win.txt"),
        "\u{feff}first\r\nsecond\r\nthird\r\n",
    );
    let out = call(
        &edit,
        edit_args("win.txt", &[("first\nsecond", "1st\n2nd")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read(f.root.join("win.txt")).unwrap_or_default(),
        "\u{feff}1st\r\n2nd\r\nthird\r\n".as_bytes()
    );
    // oldText written with CRLF matches too.
    let out = call(
        &edit,
        edit_args("win.txt", &[("2nd\r\nthird", "two\r\nthree")]),
    )
    .await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(
        std::fs::read(f.root.join("win.txt")).unwrap_or_default(),
        "\u{feff}1st\r\ntwo\r\nthree\r\n".as_bytes()
    );
    // LF files stay LF.
    write_file(&f.root.join("unix.txt"), "a\nb\n");
    let out = call(&edit, edit_args("unix.txt", &[("a\nb", "x\ny")])).await;
    assert!(!out.is_error);
    assert_eq!(
        std::fs::read(f.root.join("unix.txt")).unwrap_or_default(),
        b"x\ny\n"
    );
}

#[tokio::test]
async fn edit_diff_elides_long_lines() {
    let f = fixture();
    let edit = EditTool::new(f.env.clone());
    let long = "q".repeat(5000);
    write_file(&f.root.join("long.txt"), format!("{long}\nend\n"));
    let out = call(&edit, edit_args("long.txt", &[("end", "fin")])).await;
    let diff = detail(&out, "diff");
    let diff = diff.as_str().unwrap_or_default();
    assert!(diff.contains("bytes elided]"), "{diff}");
    assert!(diff.len() < 2000);
    assert_eq!(detail(&out, "firstChangedLine"), json!(2));
}
