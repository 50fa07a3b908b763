//! `--mode rpc`: serve Zi RPC v1 on stdin/stdout until EOF, a signal or a failure.

use tokio_util::sync::CancellationToken;
use zi_rpc::ConnectionResult;

use crate::dispose;
use crate::runtime::Runtime;
use crate::signals::SignalState;
use crate::stdio::Streams;

pub async fn run(
    runtime: Runtime,
    streams: Streams,
    cancel: CancellationToken,
    signals: SignalState,
) -> i32 {
    let session = runtime.session;
    let result = zi_rpc::serve(session.clone(), streams.input, streams.output, cancel).await;
    let disposed = dispose(&session).await;
    if let Some(code) = signals.exit_code() {
        return code;
    }
    let code = match result {
        ConnectionResult::Eof | ConnectionResult::Cancelled => 0,
        ConnectionResult::InputError(message)
        | ConnectionResult::OutputError(message)
        | ConnectionResult::SettlementError(message) => {
            eprintln!("{message}");
            1
        }
    };
    if disposed { code } else { 1 }
}
