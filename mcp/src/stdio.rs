//! The stdio transport, with one repair in front of the SDK: a request for a known method whose
//! `params` are not an object (`"params": [1, 2]`) cannot be read by the SDK as that method, and
//! the SDK would answer it -32600 without an `id`, which the client cannot match to its call.
//! Such a line is answered here, -32602 (invalid params) with the request's `id`; every other
//! line goes to the SDK unchanged. One task writes stdout, so the two sources of answers never
//! interleave within a line.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::server::KNOWN_METHODS;

/// Longest line read (the SDK's own limit); longer ones are dropped, as the SDK would.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The answer to `line` if the server gives it instead of the SDK.
pub fn answer_here(line: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(line).ok()?;
    let id = v.get("id").filter(|id| id.is_string() || id.is_number())?;
    let method = v.get("method")?.as_str()?;
    let kind = match v.get("params")? {
        Value::Null | Value::Object(_) => return None,
        Value::Array(_) => "an array",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
    };
    KNOWN_METHODS.contains(&method).then(|| {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32602,
                "message": format!("{method}: params must be an object, not {kind}"),
            },
        })
        .to_string()
    })
}

/// The SDK's ends of stdio (read, write), and the task writing stdout, to await before exiting
/// so the last answer is flushed.
pub fn transport() -> (DuplexStream, DuplexStream, JoinHandle<()>) {
    let (to_sdk, sdk_reads) = tokio::io::duplex(1 << 16);
    let (sdk_writes, from_sdk) = tokio::io::duplex(1 << 16);
    let (answers, answered) = mpsc::channel(16);
    tokio::spawn(read_stdin(to_sdk, answers));
    let writer = tokio::spawn(write_stdout(from_sdk, answered));
    (sdk_reads, sdk_writes, writer)
}

async fn read_stdin(mut to_sdk: DuplexStream, answers: mpsc::Sender<String>) {
    let mut input = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_LINE as u64 + 1;
        match (&mut input).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return, // end of input: dropping `to_sdk` ends the session
            Ok(_) => {}
        }
        if line.len() > MAX_LINE {
            // Too long: drop it through its end.
            let mut rest = Vec::new();
            while rest.last() != Some(&b'\n') {
                rest.clear();
                if !matches!((&mut input).take(limit).read_until(b'\n', &mut rest).await, Ok(n) if n > 0)
                {
                    return;
                }
            }
            eprintln!("reliable-mcp: dropped a line over {MAX_LINE} bytes");
            continue;
        }
        let sent = match answer_here(&line) {
            Some(answer) => answers.send(answer).await.is_ok(),
            None => to_sdk.write_all(&line).await.is_ok(),
        };
        if !sent {
            return;
        }
    }
}

async fn write_stdout(from_sdk: DuplexStream, mut answered: mpsc::Receiver<String>) {
    let mut out = tokio::io::stdout();
    let mut sdk = BufReader::new(from_sdk);
    let mut line = Vec::new();
    loop {
        // `read_until` keeps what it read in `line` if the other branch wins: nothing is lost.
        tokio::select! {
            read = sdk.read_until(b'\n', &mut line) => {
                if !matches!(read, Ok(n) if n > 0) {
                    break;
                }
                if out.write_all(&line).await.is_err() {
                    break;
                }
                line.clear();
            }
            Some(answer) = answered.recv() => {
                if out.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
                    break;
                }
            }
        }
        if out.flush().await.is_err() {
            break;
        }
    }
    let _ = out.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_methods_with_non_object_params_are_answered_here() {
        let a =
            answer_here(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}"#).unwrap();
        let a: Value = serde_json::from_str(&a).unwrap();
        assert_eq!(
            (a["id"].clone(), a["error"]["code"].clone()),
            (json!(7), json!(-32602))
        );
        for line in [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"no/such","params":[1]}"#,
            "not json",
        ] {
            assert_eq!(answer_here(line.as_bytes()), None, "{line}");
        }
    }
}
