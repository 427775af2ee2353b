//! The console's cookies: `__Host-` names over https (`Secure`, `Path=/`, no `Domain`),
//! so a sibling subdomain cannot set one; a cookie sent under the plain name there, or any
//! console cookie sent more than once, is not read.

use mailroom_tests::{spawn_app, TestApp};

/// A browser's client: no redirects followed, no cookie store (the test sends them).
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// `Set-Cookie` header values of `response`.
fn set_cookies(response: &reqwest::Response) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .map(str::to_owned)
        .collect()
}

/// The value of the cookie `name` one of `headers` sets.
fn value_of(headers: &[String], name: &str) -> String {
    headers
        .iter()
        .find_map(|header| {
            let (pair, _) = header.split_once(';').unwrap_or((header, ""));
            let (key, value) = pair.split_once('=')?;
            (key.trim() == name).then(|| value.to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} cookie in {headers:?}"))
}

/// Signs in with `token` (as a browser behind a TLS-terminating proxy when `https`);
/// returns the `Set-Cookie` headers of the sign-in's answer.
async fn sign_in(app: &TestApp, token: &str, https: bool) -> Vec<String> {
    let http = browser();
    let proto = if https { "https" } else { "http" };
    let prefix = if https { "__Host-" } else { "" };
    let form = http
        .get(format!("{}/console/sign-in", app.address))
        .header("x-forwarded-proto", proto)
        .send()
        .await
        .expect("the sign-in form");
    let form_cookie = value_of(
        &set_cookies(&form),
        &format!("{prefix}mailroom_console_form"),
    );
    let page = form.text().await.expect("page");
    let form_token = page
        .split("name=\"form_token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form token")
        .to_owned();
    let signed_in = http
        .post(format!("{}/console/sign-in", app.address))
        .header("x-forwarded-proto", proto)
        .header(
            "cookie",
            format!("{prefix}mailroom_console_form={form_cookie}"),
        )
        .form(&[("form_token", form_token.as_str()), ("token", token)])
        .send()
        .await
        .expect("signed in");
    assert_eq!(signed_in.status(), 303);
    set_cookies(&signed_in)
}

/// The status of `/console/accounts` with `cookie` (303 to the sign-in page: no session).
async fn accounts_page(app: &TestApp, cookie: &str, https: bool) -> u16 {
    browser()
        .get(format!("{}/console/accounts", app.address))
        .header("x-forwarded-proto", if https { "https" } else { "http" })
        .header("cookie", cookie)
        .send()
        .await
        .expect("the accounts page")
        .status()
        .as_u16()
}

#[tokio::test]
async fn over_https_the_session_cookie_is_host_prefixed_and_a_plain_named_one_is_not_read() {
    let app = spawn_app().await;
    let token = app.user_token("ada@example.com").await;
    let headers = sign_in(&app, &token, true).await;
    let session = headers
        .iter()
        .find(|header| header.starts_with("__Host-mailroom_console="))
        .unwrap_or_else(|| panic!("a __Host- session cookie in {headers:?}"));
    for attribute in ["; Path=/;", "; Secure", "; HttpOnly", "; SameSite=Strict"] {
        assert!(session.contains(attribute), "{attribute} in {session}");
    }
    assert!(
        !session.to_ascii_lowercase().contains("domain="),
        "{session}"
    );
    let value = value_of(&headers, "__Host-mailroom_console");

    let own = format!("__Host-mailroom_console={value}");
    assert_eq!(accounts_page(&app, &own, true).await, 200);
    // The same session under the plain name, as a sibling subdomain could set it: ignored.
    let plain = format!("mailroom_console={value}");
    assert_eq!(accounts_page(&app, &plain, true).await, 303);
}

#[tokio::test]
async fn a_session_cookie_sent_twice_is_no_session_so_an_injected_first_one_cannot_win() {
    let app = spawn_app().await;
    let victim = app.user_token("ada@example.com").await;
    let attacker = app.user_token("mallory@example.com").await;
    for https in [false, true] {
        let name = if https {
            "__Host-mailroom_console"
        } else {
            "mailroom_console"
        };
        let own = value_of(&sign_in(&app, &victim, https).await, name);
        let injected = value_of(&sign_in(&app, &attacker, https).await, name);
        // Both are live sessions; the browser sends the injected one first (a narrower
        // path), and neither is taken.
        let both = format!("{name}={injected}; {name}={own}");
        assert_eq!(
            accounts_page(&app, &both, https).await,
            303,
            "https: {https}"
        );
        assert_eq!(
            accounts_page(&app, &format!("{name}={own}"), https).await,
            200,
            "https: {https}"
        );
    }
}
