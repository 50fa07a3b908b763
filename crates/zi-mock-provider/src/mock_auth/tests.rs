use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A raw HTTP/1.1 request; returns the status line and the body.
async fn send(mock: &MockAuth, method: &str, path: &str, headers: &str, body: &str) -> String {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(("127.0.0.1", mock.shared.port))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

async fn token(mock: &MockAuth, form: &[(&str, &str)]) -> String {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    send(
        mock,
        "POST",
        "/oauth/token",
        "content-type: application/x-www-form-urlencoded\r\n",
        &body,
    )
    .await
}

#[tokio::test]
async fn code_exchange_checks_the_verifier_and_refresh_rotates() {
    let mock = MockAuth::start().await.unwrap();
    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let url = format!(
        "{}/oauth/authorize?response_type=code&client_id={OPENAI_CLIENT_ID}&redirect_uri=http%3A%2F%2Flocalhost%3A9%2Fcb&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s1",
        mock.base_url()
    );
    let location = mock.redirect_for(&url).unwrap();
    assert!(
        location.starts_with("http://localhost:9/cb?code="),
        "{location}"
    );
    assert!(location.ends_with("&state=s1"));
    let code = location
        .split("code=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
        .unwrap();
    let exchange = |verifier: &'static str| {
        [
            ("grant_type", "authorization_code"),
            ("client_id", OPENAI_CLIENT_ID),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", "http://localhost:9/cb"),
        ]
    };
    let wrong = token(&mock, &exchange("wrong-verifier")).await;
    assert!(
        wrong.contains(" 400 ") && wrong.contains("invalid_grant"),
        "{wrong}"
    );
    // The failed attempt spent the code, as a real server would.
    let location = mock.redirect_for(&url).unwrap();
    let code = location
        .split("code=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap();
    let mut form = exchange(verifier);
    form[2] = ("code", code);
    let ok = token(&mock, &form).await;
    assert!(ok.contains(" 200 ") && ok.contains("access_token"), "{ok}");
    let (refresh, access) = mock.current_tokens();
    let (refresh, access) = (refresh.unwrap(), access.unwrap());
    assert!(access.contains('.'));
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
        ("client_id", OPENAI_CLIENT_ID),
    ];
    assert!(token(&mock, &form).await.contains(" 200 "));
    assert!(
        token(&mock, &form).await.contains("invalid_grant"),
        "rotated"
    );
    assert_eq!(mock.token_requests("refresh_token").len(), 2);
}

#[tokio::test]
async fn device_polls_follow_the_script_and_the_token_exchanges() {
    let mock = MockAuth::start().await.unwrap();
    let form = format!("client_id={GITHUB_CLIENT_ID}&scope=read%3Auser");
    let headers = "content-type: application/x-www-form-urlencoded\r\n";
    let code = send(&mock, "POST", "/login/device/code", headers, &form).await;
    assert!(code.contains(USER_CODE), "{code}");
    mock.push_poll(DevicePoll::SlowDown(Some(7)));
    mock.push_poll(DevicePoll::Token("gho_mock".into()));
    let device = mock.requests_to("/login/device/code");
    assert_eq!(device.len(), 1);
    let poll_form = "client_id=Iv1.b507a08c87ecfe98&device_code=dc-mock-1-device-secret&grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code";
    let first = send(
        &mock,
        "POST",
        "/login/oauth/access_token",
        headers,
        poll_form,
    )
    .await;
    assert!(first.contains("slow_down") && first.contains("\"interval\":7"));
    let second = send(
        &mock,
        "POST",
        "/login/oauth/access_token",
        headers,
        poll_form,
    )
    .await;
    assert!(second.contains("gho_mock"));
    let third = send(
        &mock,
        "POST",
        "/login/oauth/access_token",
        headers,
        poll_form,
    )
    .await;
    assert!(third.contains("authorization_pending"));
    let copilot = send(
        &mock,
        "GET",
        "/copilot_internal/v2/token",
        "authorization: Bearer gho_mock\r\n",
        "",
    )
    .await;
    assert!(copilot.contains("proxy-ep=proxy.mock.invalid"), "{copilot}");
    let refused = send(
        &mock,
        "GET",
        "/copilot_internal/v2/token",
        "authorization: Bearer other\r\n",
        "",
    )
    .await;
    assert!(refused.contains(" 401 "));
}
