//! `update_plan` (docs/tools.md#update_plan): replaces the whole work plan.

use std::sync::LazyLock;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use zi_agent::tool::{KEY_ORDER, parameters_schema, undescribed};
use zi_agent::{ToolCallContext, ToolOutput, TypedTool};
use zi_protocol::state::{PlanStep, PlanStepStatus};

pub const MAX_STEPS: usize = 32;
pub const MAX_STEP_TEXT_BYTES: usize = 512;
pub const MAX_PLAN_TEXT_BYTES: usize = 16 * 1024;
pub const MAX_EXPLANATION_BYTES: usize = 4 * 1024;

static PARAMETERS: LazyLock<Value> = LazyLock::new(|| parameters_schema::<PlanArgs>(KEY_ORDER));

/// The arguments of `update_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanArgs {
    /// Why the plan changed (optional)
    pub explanation: Option<String>,
    /// The whole plan; an empty list clears it
    pub steps: Vec<PlanItem>,
}

/// One step of an `update_plan` call. The model is told nothing more about the step's fields
/// than their types, so they carry no doc comment (it would become their description).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = undescribed)]
pub struct PlanItem {
    // What the step is; trimmed, non-empty, at most MAX_STEP_TEXT_BYTES.
    pub(crate) text: String,
    #[schemars(with = "StepStatus")]
    pub(crate) status: PlanStepStatus,
}

/// The schema of a step's status: [`PlanStepStatus`]'s words as a plain `enum` (zi-protocol's
/// own schema of it describes each word, which the model was never shown).
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(transform = undescribed)]
#[expect(dead_code, reason = "only its schema is read")]
enum StepStatus {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

/// The `update_plan` tool (docs/tools.md#update_plan).
pub struct UpdatePlanTool;

impl TypedTool for UpdatePlanTool {
    type Args = PlanArgs;

    fn name(&self) -> &str {
        "update_plan"
    }

    fn description(&self) -> &str {
        "Replace the work plan: a short list of steps, each pending, in_progress, completed or cancelled, with at most one in_progress."
    }

    fn parameters(&self) -> &Value {
        &PARAMETERS
    }

    fn execute(&self, args: PlanArgs, call: ToolCallContext) -> BoxFuture<'static, ToolOutput> {
        Box::pin(async move {
            let (explanation, steps) = match parse_plan(args) {
                Ok(plan) => plan,
                Err(error) => return ToolOutput::failure("invalid_plan", error.to_string()),
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

/// A plan over the limits of docs/tools.md#update_plan; the Display is the tool's failure text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("explanation exceeds {MAX_EXPLANATION_BYTES} bytes")]
    Explanation,
    #[error("A plan has at most {MAX_STEPS} steps")]
    TooManySteps,
    #[error("steps[{0}].text must not be empty")]
    EmptyStep(usize),
    #[error("steps[{0}].text exceeds {MAX_STEP_TEXT_BYTES} bytes")]
    LongStep(usize),
    #[error("Step text exceeds {MAX_PLAN_TEXT_BYTES} bytes in total")]
    TotalText,
    #[error("At most one step may be in_progress")]
    SeveralInProgress,
}

/// Validates the limits of docs/tools.md#update_plan; step text is trimmed.
pub(crate) fn parse_plan(args: PlanArgs) -> Result<(Option<String>, Vec<PlanStep>), PlanError> {
    let explanation = args.explanation.filter(|e| !e.trim().is_empty());
    if explanation
        .as_ref()
        .is_some_and(|e| e.len() > MAX_EXPLANATION_BYTES)
    {
        return Err(PlanError::Explanation);
    }
    if args.steps.len() > MAX_STEPS {
        return Err(PlanError::TooManySteps);
    }
    let mut steps = Vec::with_capacity(args.steps.len());
    let mut total = 0;
    for (index, item) in args.steps.into_iter().enumerate() {
        let text = item.text.trim().to_string();
        if text.is_empty() {
            return Err(PlanError::EmptyStep(index));
        }
        if text.len() > MAX_STEP_TEXT_BYTES {
            return Err(PlanError::LongStep(index));
        }
        total += text.len();
        steps.push(PlanStep {
            text,
            status: item.status,
        });
    }
    if total > MAX_PLAN_TEXT_BYTES {
        return Err(PlanError::TotalText);
    }
    if steps
        .iter()
        .filter(|s| s.status == PlanStepStatus::InProgress)
        .count()
        > 1
    {
        return Err(PlanError::SeveralInProgress);
    }
    Ok((explanation, steps))
}
