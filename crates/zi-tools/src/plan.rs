//! `update_plan` (docs/tools.md#update_plan): replaces the whole work plan.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use zi_agent::{ToolCallContext, ToolOutput, TypedTool};
use zi_protocol::state::{PlanStep, PlanStepStatus};

pub const MAX_STEPS: usize = 32;
pub const MAX_STEP_TEXT_BYTES: usize = 512;
pub const MAX_PLAN_TEXT_BYTES: usize = 16 * 1024;
pub const MAX_EXPLANATION_BYTES: usize = 4 * 1024;

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "explanation": {"type": "string", "description": "Why the plan changed (optional)"},
            "steps": {
                "type": "array",
                "description": "The whole plan; an empty list clears it",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"]}
                    },
                    "required": ["text", "status"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["steps"],
        "additionalProperties": false
    })
});

pub struct UpdatePlanTool;

impl TypedTool for UpdatePlanTool {
    type Args = Value;

    fn name(&self) -> &str {
        "update_plan"
    }

    fn description(&self) -> &str {
        "Replace the work plan: a short list of steps, each pending, in_progress, completed or cancelled, with at most one in_progress."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn execute(&self, arguments: Value, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            let (explanation, steps) = match parse_plan(&arguments) {
                Ok(plan) => plan,
                Err(message) => return ToolOutput::failure("invalid_plan", message),
            };
            match call.host.replace_work_plan(explanation, steps) {
                Ok(plan) => ToolOutput::success(
                    format!("Plan updated to revision {}.", plan.revision),
                    json!({"revision": plan.revision, "steps": plan.steps.len()}),
                ),
                Err(error) => {
                    ToolOutput::failure("unavailable", format!("Plan not updated: {error}"))
                }
            }
        })
    }
}

/// Validates the limits of docs/tools.md#update_plan; step text is trimmed.
pub(crate) fn parse_plan(args: &Value) -> Result<(Option<String>, Vec<PlanStep>), String> {
    let explanation = args
        .get("explanation")
        .and_then(Value::as_str)
        .map(str::to_string)
        .filter(|e| !e.trim().is_empty());
    if explanation
        .as_ref()
        .is_some_and(|e| e.len() > MAX_EXPLANATION_BYTES)
    {
        return Err(format!("explanation exceeds {MAX_EXPLANATION_BYTES} bytes"));
    }
    let items = args
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items.len() > MAX_STEPS {
        return Err(format!("A plan has at most {MAX_STEPS} steps"));
    }
    let mut steps = Vec::with_capacity(items.len());
    let mut total = 0;
    for (index, item) in items.iter().enumerate() {
        let text = item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string();
        if text.is_empty() {
            return Err(format!("steps[{index}].text must not be empty"));
        }
        if text.len() > MAX_STEP_TEXT_BYTES {
            return Err(format!(
                "steps[{index}].text exceeds {MAX_STEP_TEXT_BYTES} bytes"
            ));
        }
        total += text.len();
        let status = serde_json::from_value::<PlanStepStatus>(
            item.get("status").cloned().unwrap_or(Value::Null),
        )
        .map_err(|_| format!("steps[{index}].status is invalid"))?;
        steps.push(PlanStep { text, status });
    }
    if total > MAX_PLAN_TEXT_BYTES {
        return Err(format!(
            "Step text exceeds {MAX_PLAN_TEXT_BYTES} bytes in total"
        ));
    }
    if steps
        .iter()
        .filter(|s| s.status == PlanStepStatus::InProgress)
        .count()
        > 1
    {
        return Err("At most one step may be in_progress".to_string());
    }
    Ok((explanation, steps))
}
