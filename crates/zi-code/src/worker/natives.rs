//! The only two host functions a cell's glue receives: `call(name, inputJson)` and
//! `log(text)`. Both check their bounds here, in Rust, whatever the glue or the cell did to
//! the JavaScript side.

use std::cell::RefCell;
use std::rc::Rc;

use rquickjs::{Ctx, Exception, Function, Object};
use serde_json::json;

use super::io::{send, send_body};
use super::{Shared, Stop};
use crate::protocol::{MAX_DEPTH, MAX_INPUT_BYTES, json_depth};

pub(super) fn install<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<RefCell<Shared>>,
) -> rquickjs::Result<Object<'js>> {
    let natives = Object::new(ctx.clone())?;
    let state = shared.clone();
    let call = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, name: String, input: String| {
            let mut shared = state.borrow_mut();
            let id = shared.next_id;
            if id > shared.max_calls {
                let max = shared.max_calls;
                // Fatal even if the cell catches the throw.
                shared.stop = Some(Stop::CallLimit(max));
                return Err(Exception::throw_range(
                    &ctx,
                    &format!("a cell may make at most {max} calls"),
                ));
            }
            if input.len() > MAX_INPUT_BYTES {
                return Err(Exception::throw_range(
                    &ctx,
                    &format!(
                        "the input is {} bytes of JSON; at most {MAX_INPUT_BYTES} may cross to zi",
                        input.len()
                    ),
                ));
            }
            if json_depth(&input) > MAX_DEPTH {
                return Err(Exception::throw_range(
                    &ctx,
                    &format!("the input nests deeper than {MAX_DEPTH} levels"),
                ));
            }
            shared.next_id += 1;
            shared.outstanding += 1;
            drop(shared);
            // The input is JSON.stringify's output: spliced in, never parsed here.
            let name = serde_json::Value::String(name).to_string();
            let body = format!(r#"{{"t":"call","id":{id},"name":{name},"input":{input}}}"#);
            send_body(body.as_bytes());
            Ok::<f64, rquickjs::Error>(id as f64)
        },
    )?;
    natives.set("call", call)?;
    let state = shared.clone();
    let log = Function::new(ctx.clone(), move |text: String| {
        let mut shared = state.borrow_mut();
        if shared.log_cut {
            return;
        }
        let room = shared.max_log.saturating_sub(shared.log_bytes);
        let (text, cut) = if text.len() + 1 > room {
            let mut end = room.saturating_sub(1);
            while end > 0 && !text.is_char_boundary(end) {
                end -= 1;
            }
            (&text[..end], true)
        } else {
            (&text[..], false)
        };
        if !(cut && text.is_empty()) {
            shared.log_bytes += text.len() + 1;
        }
        shared.log_cut = cut;
        drop(shared);
        // Each line leaves at once, so logs survive a kill (an empty cut line only says that
        // the rest was dropped).
        send(&json!({"t": "log", "text": text, "truncated": cut}));
    })?;
    natives.set("log", log)?;
    Ok(natives)
}
