//! update_plan's limits (docs/tools.md).

use super::*;

// ---------------------------------------------------------------------------------------------
// update_plan
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn update_plan_validates_limits() {
    let plan = UpdatePlanTool;
    let step = |text: &str, status: &str| json!({"text": text, "status": status});
    let two_active = json!({"steps": [step("a", "in_progress"), step("b", "in_progress")]});
    assert_error(&call(&plan, two_active).await, "invalid_plan");
    let too_many: Vec<Value> = (0..33).map(|i| step(&format!("s{i}"), "pending")).collect();
    assert_error(
        &call(&plan, json!({"steps": too_many})).await,
        "invalid_plan",
    );
    assert_error(
        &call(&plan, json!({"steps": [step(&"x".repeat(513), "pending")]})).await,
        "invalid_plan",
    );
    assert_error(
        &call(&plan, json!({"steps": [], "explanation": "e".repeat(4097)})).await,
        "invalid_plan",
    );
    // 32 steps of 512 bytes (after trimming) are exactly the 32-step and 16 KiB limits, so
    // the plan reaches the session (detached here).
    let at_limit: Vec<Value> = (0..32)
        .map(|_| step(&format!("  {}  ", "x".repeat(512)), "pending"))
        .collect();
    assert_error(
        &call(
            &plan,
            json!({"steps": at_limit, "explanation": "e".repeat(4096)}),
        )
        .await,
        "unavailable",
    );
}
