//! `zi-conformance --server "zi --mode rpc --no-session --agent-dir {agent_dir} --model {model}"
//! [--report FILE] [--filter TEXT]`
//!
//! Runs the Zi RPC v1 conformance checks against a server command and prints one line per check,
//! the wire transcript of every failure and `N passed, M failed, K skipped`. Exits 0 when every
//! check passed (skips allowed), 1 when any failed, 2 on usage errors.

use std::path::PathBuf;

use zi_conformance::{Config, run, write_report};

const USAGE: &str = "usage: zi-conformance --server \"CMD {agent_dir} {model} {cwd}\" [--report FILE] [--filter TEXT]";

fn main() {
    std::process::exit(real_main());
}

fn real_main() -> i32 {
    let mut server = None;
    let mut report = None;
    let mut filter = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--server" => server = args.next(),
            "--report" => report = args.next().map(PathBuf::from),
            "--filter" => filter = args.next(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return 0;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    let Some(server) = server else {
        eprintln!("{USAGE}");
        return 2;
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("could not start the runtime: {e}");
            return 2;
        }
    };
    let summary = runtime.block_on(run(&Config { server, filter }));
    print!("{}", summary.text());
    if let Some(path) = report
        && let Err(e) = write_report(&summary, &path)
    {
        eprintln!("could not write {}: {e}", path.display());
        return 2;
    }
    if summary.failed() > 0 { 1 } else { 0 }
}
