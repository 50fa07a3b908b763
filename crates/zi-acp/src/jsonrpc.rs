//! JSON-RPC 2.0 as ACP uses it (docs/acp.md#connection): one message per line; requests,
//! notifications and responses in both directions; the error codes the protocol names.
//!
//! This layer is zi's own (the schema crate supplies only the types of `params` and `result`):
//! [`parse`] classifies one input line with the exact error a bad one earns, and the `*_line`
//! functions serialize outgoing messages straight from borrowed values into the bytes the
//! ordered writer queues.

use serde::Serialize;
use serde_json::{Map, Value};

/// Not JSON.
pub const PARSE_ERROR: i32 = -32700;
/// JSON, but not a JSON-RPC 2.0 message.
pub const INVALID_REQUEST: i32 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// The params do not fit the method.
pub const INVALID_PARAMS: i32 = -32602;
/// zi failed (a provider error, a journal that cannot be written).
pub const INTERNAL_ERROR: i32 = -32603;
/// No usable model: the credentials are missing.
pub const AUTH_REQUIRED: i32 = -32000;
/// Unknown or closed session.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// The request was cancelled with `$/cancel_request`.
pub const REQUEST_CANCELLED: i32 = -32800;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> RpcError {
        RpcError::new(INTERNAL_ERROR, message)
    }

    /// `-32002`, naming the session in `data.sessionId`.
    pub fn session_not_found(session_id: &str) -> RpcError {
        RpcError {
            code: RESOURCE_NOT_FOUND,
            message: format!("Session not found: {session_id}"),
            data: Some(serde_json::json!({ "sessionId": session_id })),
        }
    }

    pub fn method_not_found(method: &str) -> RpcError {
        RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }
}

/// One message read from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// The client's answer to a request zi sent.
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
}

/// A line that is not a message zi can act on, with the id to answer when one was readable.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Value,
    pub error: RpcError,
}

fn reject(id: Value, code: i32, message: &str) -> Box<Rejected> {
    Box::new(Rejected {
        id,
        error: RpcError::new(code, message),
    })
}

/// Classifies one input line (docs/acp.md#bad-input).
pub fn parse(line: &str) -> Result<Incoming, Box<Rejected>> {
    let value: Value = serde_json::from_str(line)
        .map_err(|error| reject(Value::Null, PARSE_ERROR, &format!("Parse error: {error}")))?;
    let Value::Object(mut object) = value else {
        let message = if value.is_array() {
            "Invalid request: batches are not supported"
        } else {
            "Invalid request: a message must be a JSON object"
        };
        return Err(reject(Value::Null, INVALID_REQUEST, message));
    };
    let id = object.remove("id");
    if let Some(id) = &id
        && !valid_id(id)
    {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: id must be a string, an integer or null",
        ));
    }
    let echo = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(reject(
            echo,
            INVALID_REQUEST,
            "Invalid request: jsonrpc must be \"2.0\"",
        ));
    }
    match object.remove("method") {
        Some(Value::String(method)) => {
            let params = object.remove("params");
            if params
                .as_ref()
                .is_some_and(|p| !(p.is_object() || p.is_array() || p.is_null()))
            {
                return Err(reject(
                    echo,
                    INVALID_REQUEST,
                    "Invalid request: params must be an object",
                ));
            }
            let params = params.filter(|p| !p.is_null());
            Ok(match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            })
        }
        Some(_) => Err(reject(
            echo,
            INVALID_REQUEST,
            "Invalid request: method must be a string",
        )),
        None => response(id, object),
    }
}

fn response(id: Option<Value>, mut object: Map<String, Value>) -> Result<Incoming, Box<Rejected>> {
    let Some(id) = id else {
        return Err(reject(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: a message needs a method or an id",
        ));
    };
    match (object.remove("result"), object.remove("error")) {
        (Some(result), None) => Ok(Incoming::Response {
            id,
            outcome: Ok(result),
        }),
        (None, Some(error)) => Ok(Incoming::Response {
            id,
            outcome: Err(error),
        }),
        _ => Err(reject(
            id,
            INVALID_REQUEST,
            "Invalid request: a response has exactly one of result and error",
        )),
    }
}

fn valid_id(id: &Value) -> bool {
    match id {
        Value::String(_) | Value::Null => true,
        Value::Number(number) => number.is_i64() || number.is_u64(),
        _ => false,
    }
}

#[derive(Serialize)]
struct ResultMessage<'a, R: Serialize + ?Sized> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: &'a R,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

#[derive(Serialize)]
struct RequestMessage<'a, P: Serialize + ?Sized> {
    jsonrpc: &'static str,
    id: i64,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct NotificationMessage<'a, P: Serialize + ?Sized> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

/// Bytes of one line (without its LF).
pub type Line = Result<Vec<u8>, serde_json::Error>;

/// A successful response.
pub fn result_line<R: Serialize + ?Sized>(id: &Value, result: &R) -> Line {
    serde_json::to_vec(&ResultMessage {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// A failed response.
pub fn error_line(id: &Value, error: &RpcError) -> Line {
    serde_json::to_vec(&ErrorMessage {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// A response: the result, or the error.
pub fn response_line<R: Serialize>(id: &Value, outcome: &Result<R, RpcError>) -> Line {
    match outcome {
        Ok(result) => result_line(id, result),
        Err(error) => error_line(id, error),
    }
}

/// A request zi sends (its ids are zi's own integers).
pub fn request_line<P: Serialize + ?Sized>(id: i64, method: &str, params: &P) -> Line {
    serde_json::to_vec(&RequestMessage {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// A notification zi sends.
pub fn notification_line<P: Serialize + ?Sized>(method: &str, params: &P) -> Line {
    serde_json::to_vec(&NotificationMessage {
        jsonrpc: "2.0",
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(line: &str) -> (Value, i32) {
        let rejected = parse(line).unwrap_err();
        (rejected.id, rejected.error.code)
    }

    #[test]
    fn bad_lines_get_the_codes_json_rpc_names() {
        assert_eq!(code("{"), (Value::Null, PARSE_ERROR));
        assert_eq!(code(""), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[1]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(code("7"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#),
            (json!(3), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a","method":7}"#),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a","method":"m","params":3}"#),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2}"#),
            (json!(2), INVALID_REQUEST)
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0"}"#), (Value::Null, INVALID_REQUEST));
    }

    #[test]
    fn messages_are_classified() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}"#).unwrap(),
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: Some(json!({"a": 1})),
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":null}"#).unwrap(),
            Incoming::Notification {
                method: "session/cancel".into(),
                params: None,
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}"#).unwrap(),
            Incoming::Response {
                id: json!(4),
                outcome: Err(json!({"code": 1, "message": "m"})),
            }
        );
    }

    #[test]
    fn lines_are_compact_json_rpc() {
        let line = result_line(&json!("x"), &json!({"a": 1})).unwrap();
        assert_eq!(line, br#"{"jsonrpc":"2.0","id":"x","result":{"a":1}}"#);
        let line = error_line(&Value::Null, &RpcError::session_not_found("s")).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"Session not found: s","data":{"sessionId":"s"}}}"#
        );
        let line = request_line(7, "fs/read_text_file", &json!({})).unwrap();
        assert_eq!(
            line,
            br#"{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{}}"#
        );
    }
}
