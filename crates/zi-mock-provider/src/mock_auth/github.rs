//! GitHub's device flow and the Copilot token exchange as the mock plays them. Like GitHub, the
//! poll endpoint answers HTTP 200 with `{"error": …}` while the person has not approved.

use serde_json::json;

use zi_os::sync::lock;

use super::{
    AuthRequest, DevicePoll, GITHUB_CLIENT_ID, Shared, USER_CODE, json_response, now_secs,
};

/// `POST /login/device/code`.
pub(super) fn device_code(shared: &Shared, request: &AuthRequest) -> axum::response::Response {
    if request.field("client_id") != Some(GITHUB_CLIENT_ID) {
        return json_response(400, json!({"error": "invalid_client"}));
    }
    let mut state = lock(&shared.state);
    state.issued += 1;
    let device_code = format!("dc-mock-{}-device-secret", state.issued);
    state.device_codes.insert(device_code.clone());
    json_response(
        200,
        json!({
            "device_code": device_code,
            "user_code": USER_CODE,
            "verification_uri": format!("http://127.0.0.1:{}/login/device", shared.port),
            "expires_in": state.device_expires_in,
            "interval": state.device_interval,
        }),
    )
}

/// `POST /login/oauth/access_token`: the next scripted poll answer.
pub(super) fn poll(shared: &Shared, request: &AuthRequest) -> axum::response::Response {
    let mut state = lock(&shared.state);
    let known = request
        .field("device_code")
        .is_some_and(|code| state.device_codes.contains(code));
    if request.field("client_id") != Some(GITHUB_CLIENT_ID)
        || request.field("grant_type") != Some("urn:ietf:params:oauth:grant-type:device_code")
        || !known
    {
        return json_response(200, json!({"error": "incorrect_device_code"}));
    }
    let error = |code: &str| json_response(200, json!({"error": code}));
    match state.polls.pop_front().unwrap_or(DevicePoll::Pending) {
        DevicePoll::Pending => error("authorization_pending"),
        DevicePoll::SlowDown(None) => error("slow_down"),
        DevicePoll::SlowDown(Some(interval)) => {
            json_response(200, json!({"error": "slow_down", "interval": interval}))
        }
        DevicePoll::Expired => error("expired_token"),
        DevicePoll::Denied => error("access_denied"),
        DevicePoll::Token(token) => {
            state.github_tokens.insert(token.clone());
            json_response(
                200,
                json!({"access_token": token, "token_type": "bearer", "scope": "read:user"}),
            )
        }
    }
}

/// `GET /copilot_internal/v2/token` with `Authorization: Bearer <GitHub token>`.
pub(super) fn copilot_token(shared: &Shared, request: &AuthRequest) -> axum::response::Response {
    let mut state = lock(&shared.state);
    if let Some(status) = state.copilot_fail_next.take() {
        return json_response(status, json!({"message": "Bad credentials"}));
    }
    let known = request
        .header("authorization")
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|token| state.github_tokens.contains(token));
    if !known {
        return json_response(401, json!({"message": "Bad credentials"}));
    }
    state.issued += 1;
    let expires_at = now_secs() + state.copilot_lifetime;
    let token = format!(
        "tid=copilot-mock-{n};exp={expires_at};proxy-ep=proxy.mock.invalid;sku=free:sig-copilot-{n}-secret",
        n = state.issued
    );
    state.last_copilot = Some(token.clone());
    json_response(
        200,
        json!({
            "token": token,
            "expires_at": expires_at,
            "refresh_in": 1500,
            "endpoints": {"api": "https://api.mock.invalid"},
        }),
    )
}
