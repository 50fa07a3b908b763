//! What a test scripts (one [`Step`] per request) and what the mock records.

use serde_json::Value;

/// What the server answers to one chat-completions request.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Content deltas, then finish_reason "stop".
    Text(Vec<String>),
    /// The general form: reasoning deltas (sent as `reasoning_content`), then text deltas, then
    /// tool calls whose arguments are streamed in `args_chunks` fragments (the first fragment
    /// carries id, type and name), then `finish_reason`. Like every step, the usage chunk is
    /// sent only when the request set `stream_options.include_usage`; without scripted `usage`
    /// the mock estimates it (a quarter of the messages' JSON bytes in, one token per delta out).
    Reply {
        /// Reasoning deltas.
        thinking: Vec<String>,
        /// Text deltas.
        text: Vec<String>,
        /// Tool calls, after the text.
        tool_calls: Vec<MockToolCall>,
        /// The final `finish_reason` (`stop`, `tool_calls`, `length`).
        finish_reason: String,
        /// The usage to report; `None` estimates it.
        usage: Option<MockUsage>,
    },
    /// An HTTP status with a JSON error body like OpenAI's `{"error":{"message","type","code"}}`.
    HttpError {
        /// The HTTP status.
        status: u16,
        /// The error's `message`.
        message: String,
    },
    /// An HTTP status with exactly this JSON body (a vendor's own error shape).
    HttpJson {
        /// The HTTP status.
        status: u16,
        /// The body, sent as JSON.
        body: Value,
    },
    /// Some content deltas, then an SSE event `data: {"error":{"message":...}}`, and the body ends.
    MidStreamError {
        /// Content deltas before the error.
        text: Vec<String>,
        /// The error's `message`.
        message: String,
    },
    /// Some content deltas, then the body ends with no finish_reason and no `[DONE]`.
    Truncated(Vec<String>),
    /// Headers and the given content deltas, then the response stays open until the client goes
    /// away (counted in [`MockLlm::disconnects`]) or the server shuts down.
    Hang(Vec<String>),
    /// A reply whose text is `total_bytes` bytes of `x`, sent as `delta_bytes`-byte content
    /// deltas, then finish_reason "stop" and usage.
    Bytes {
        /// The length of the whole text.
        total_bytes: usize,
        /// The length of each delta (the last may be shorter).
        delta_bytes: usize,
    },
    /// A body sent exactly as given (a `text/event-stream` of any vendor's events), then the
    /// end of the body, or, with `hang`, a wait like [`Step::Hang`].
    Sse {
        /// The response body.
        body: String,
        /// Keep the response open after the body, like [`Step::Hang`].
        hang: bool,
    },
    /// `step`, served only once `requests` requests naming `model` were recorded (this one
    /// included): a reply held until another process (a delegating parent) made its request,
    /// so a test orders two processes without timing.
    After {
        /// The model whose requests are counted.
        model: String,
        /// How many requests naming it must have been recorded.
        requests: usize,
        /// What to serve then.
        step: Box<Step>,
    },
}

impl Step {
    /// A reply with one content delta.
    pub fn text(s: &str) -> Step {
        Step::Text(vec![s.to_string()])
    }

    /// [`Step::After`]: `step` once `requests` requests naming `model` were recorded.
    pub fn after(model: &str, requests: usize, step: Step) -> Step {
        Step::After {
            model: model.to_string(),
            requests,
            step: Box::new(step),
        }
    }

    /// A reply with several tool calls `(id, name, arguments)`, each streamed in one fragment,
    /// finish_reason "tool_calls".
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Step {
        Step::Reply {
            thinking: Vec::new(),
            text: Vec::new(),
            tool_calls: calls
                .iter()
                .map(|(id, name, args)| MockToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    args_chunks: vec![args.to_string()],
                })
                .collect(),
            finish_reason: "tool_calls".to_string(),
            usage: None,
        }
    }

    /// A reply with one tool call whose arguments arrive in two fragments, finish_reason
    /// "tool_calls".
    pub fn tool_call(id: &str, name: &str, args: Value) -> Step {
        Step::Reply {
            thinking: Vec::new(),
            text: Vec::new(),
            tool_calls: vec![MockToolCall {
                id: id.to_string(),
                name: name.to_string(),
                args_chunks: split_in_two(&args.to_string()),
            }],
            finish_reason: "tool_calls".to_string(),
            usage: None,
        }
    }
}

/// A tool call of a [`Step::Reply`].
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The JSON arguments text, in the fragments it is streamed in.
    pub args_chunks: Vec<String>,
}

/// Token counts reported in the final usage chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MockUsage {
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Input tokens read from the cache.
    pub cached_tokens: u64,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request path (`/v1/chat/completions`, …).
    pub path: String,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The JSON body, or the body text as a JSON string when it is not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// Splits text in two at a char boundary near its middle.
pub(super) fn split_in_two(text: &str) -> Vec<String> {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    vec![text[..middle].to_string(), text[middle..].to_string()]
}
