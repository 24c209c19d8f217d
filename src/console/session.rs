//! Signing in and out of the console, and who is asking: the session
//! cookie, the signed-in staff member of a request ([`Staff`]) and the form
//! extractor that refuses a post without the session's form token
//! ([`Posted`]).
//!
//! A console session rides on a sign-in session of the API (opened by the
//! same password check, under the same rate limits), so the checks the API
//! makes of a bearer token are made of every console request: an inactive
//! user, a changed password, role or branch, or a revoked session end it at
//! once. On top, a session unused for `auth.console_idle_secs` is ended, and
//! every session ends `auth.console_max_age_secs` after sign-in. A page's
//! own periodic refresh ([`Background`]) is not use: it renews nothing.

use std::future::Future;
use std::pin::Pin;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use askama::Template;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::{html, Failure, Outcome};
use crate::auth::{client_address, load_active, tokens, Caller};
use crate::state::AppState;
use domain::users;
use domain::users::console_sessions::{self, Use};
use domain::users::sign_in;
use domain::{Error, Role};

/// The session cookie: a random token whose digest keys `console_sessions`.
pub const SESSION_COOKIE: &str = "console_session";
/// The sign-in form's token (double submit: cookie and hidden field).
pub const LOGIN_COOKIE: &str = "console_login";
/// Why a visitor without any session cookie is sent to sign in.
pub const NO_SESSION: &str = "Sign in to use the console.";
/// The name of the hidden field every console form carries.
pub const CSRF_FIELD: &str = "csrf";

/// The signed-in staff member of a console request.
#[derive(Debug, Clone)]
pub struct Staff {
    pub caller: Caller,
    pub full_name: String,
    pub email: String,
    /// The session's form token, for the forms of the page.
    pub csrf: String,
}

impl Staff {
    pub fn role(&self) -> Role {
        self.caller.role
    }
}

/// Whether the request reached us over TLS: directly, or through a trusted
/// proxy that says so (`X-Forwarded-Proto`/`Forwarded`, honoured only with
/// `http.trust_forwarded_for`).
fn over_tls(req: &HttpRequest, state: &AppState) -> bool {
    req.app_config().secure()
        || (state.config.http.trust_forwarded_for
            && req.connection_info().scheme().eq_ignore_ascii_case("https"))
}

/// A console cookie: HttpOnly, SameSite=Strict, limited to `/console`,
/// Secure over TLS.
fn cookie<'a>(req: &HttpRequest, state: &AppState, name: &'a str, value: String) -> Cookie<'a> {
    Cookie::build(name, value)
        .path("/console")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(over_tls(req, state))
        .finish()
}

/// The same cookie, expired.
fn removal<'a>(req: &HttpRequest, state: &AppState, name: &'a str) -> Cookie<'a> {
    let mut c = cookie(req, state, name, String::new());
    c.make_removal();
    c
}

fn state_of(req: &HttpRequest) -> Result<web::Data<AppState>, Failure> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| Failure::Page(Error::internal("application state missing")))
}

/// Ends the console session of `digest` and the sign-in it rode on.
async fn end(state: &AppState, digest: Vec<u8>) -> Result<(), Error> {
    sign_in::end_console(&state.pool, digest).await
}

/// The staff member of the session cookie, or [`Failure::SignIn`].
async fn staff_of(state: &AppState, token: Option<String>, how: Use) -> Result<Staff, Failure> {
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Err(Failure::SignIn(NO_SESSION));
    };
    let digest = tokens::refresh_digest(&token);
    let life = state.config.auth.console_lifetime();
    let found = {
        let client = state.pool.get().await?;
        console_sessions::touch(&client, digest.clone(), life, how).await?
    };
    let Some(session) = found else {
        // Unknown, or idle too long: whatever is left of it ends now.
        end(state, digest).await?;
        return Err(Failure::SignIn(
            "Your session has ended (it was idle too long, reached its time limit, or was \
             signed out). Sign in again.",
        ));
    };
    let caller = match load_active(
        state,
        session.user_id,
        session.auth_session_id,
        session.token_version,
    )
    .await
    {
        Ok(caller) => caller,
        Err(Error::Unauthorized(_)) => {
            end(state, digest).await?;
            return Err(Failure::SignIn(
                "Your sign-in has ended: the account was deactivated or changed, \
                 or signed out elsewhere. Sign in again.",
            ));
        }
        Err(other) => return Err(other.into()),
    };
    let client = state.pool.get().await?;
    let user = users::get(&client, caller.user_id)
        .await?
        .ok_or(Failure::SignIn("This account is no longer active."))?;
    Ok(Staff {
        caller,
        full_name: user.full_name,
        email: user.email,
        csrf: session.csrf_token,
    })
}

impl FromRequest for Staff {
    type Error = Failure;
    type Future = Pin<Box<dyn Future<Output = Result<Staff, Failure>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state_of(req);
        let token = req.cookie(SESSION_COOKIE).map(|c| c.value().to_owned());
        Box::pin(async move { staff_of(&*state?, token, Use::ByUser).await })
    }
}

/// The staff member of a page's own periodic refresh (the operations
/// page's live table): the same checks as [`Staff`], but the request does
/// not count as use, so a page left open still idles out.
pub struct Background(pub Staff);

impl FromRequest for Background {
    type Error = Failure;
    type Future = Pin<Box<dyn Future<Output = Result<Background, Failure>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = state_of(req);
        let token = req.cookie(SESSION_COOKIE).map(|c| c.value().to_owned());
        Box::pin(async move {
            staff_of(&*state?, token, Use::Background)
                .await
                .map(Background)
        })
    }
}

/// Compares two tokens in time independent of where they differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A form posted by a signed-in staff member, with the session's form
/// token checked before anything else is read: a post without it, or with
/// another session's, is refused (403) and changes nothing.
pub struct Posted<T> {
    pub staff: Staff,
    pub form: T,
}

/// A form with no fields but the token (sign-out, approve, revoke).
#[derive(Debug, Default, Deserialize)]
pub struct NoFields {}

fn form_token(body: &[u8]) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(k, _)| k == CSRF_FIELD)
        .map(|(_, v)| v.into_owned())
}

impl<T: DeserializeOwned + 'static> FromRequest for Posted<T> {
    type Error = Failure;
    type Future = Pin<Box<dyn Future<Output = Result<Posted<T>, Failure>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let staff = Staff::from_request(req, payload);
        let body = web::Bytes::from_request(req, payload);
        Box::pin(async move {
            let staff = staff.await?;
            let body = body
                .await
                .map_err(|_| Failure::Page(Error::bad_request("The form could not be read.")))?;
            let sent = form_token(&body).unwrap_or_default();
            if !same_token(&sent, &staff.csrf) {
                return Err(Failure::Csrf);
            }
            let form = serde_urlencoded::from_bytes(&body).map_err(|e| {
                Failure::Page(Error::bad_request(format!("The form is not valid: {e}.")))
            })?;
            Ok(Posted { staff, form })
        })
    }
}

#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage<'a> {
    csrf: &'a str,
    email: &'a str,
    message: Option<&'a str>,
    /// The field the message is about (`email` or `password`), if any.
    field: &'a str,
}

#[derive(Debug, Default, Deserialize)]
pub struct LoginQuery {
    /// Why the visitor was sent here.
    pub ended: Option<String>,
}

/// `GET /console/login`: the sign-in form, with a fresh form token in a
/// cookie and in the form.
pub async fn login_form(
    req: HttpRequest,
    state: web::Data<AppState>,
    q: web::Query<LoginQuery>,
) -> Outcome {
    let (token, _) = tokens::new_refresh_token();
    let message = q
        .ended
        .as_deref()
        .map(|_| "Your session has ended. Sign in again.");
    let page = LoginPage {
        csrf: &token,
        email: "",
        message,
        field: "",
    };
    let mut res = html(&page)?;
    res.add_cookie(&cookie(&req, &state, LOGIN_COOKIE, token.clone()))
        .map_err(Error::internal)?;
    Ok(res)
}

#[derive(Debug, Default, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    pub email: String,
    #[serde(default)]
    pub password: String,
    #[serde(default)]
    pub csrf: String,
}

/// Re-renders the form with a message beside `field` and `status`.
fn login_again(
    req: &HttpRequest,
    state: &AppState,
    email: &str,
    message: &str,
    field: &str,
    status: actix_web::http::StatusCode,
) -> Outcome {
    let (token, _) = tokens::new_refresh_token();
    let page = LoginPage {
        csrf: &token,
        email,
        message: Some(message),
        field,
    };
    let mut res = html(&page)?;
    *res.status_mut() = status;
    res.add_cookie(&cookie(req, state, LOGIN_COOKIE, token.clone()))
        .map_err(Error::internal)?;
    Ok(res)
}

/// `POST /console/login`: checks the password exactly as `POST
/// /auth/login` does (same rate limits), opens a sign-in session and a
/// console session on it, and sends the browser to the dashboard.
pub async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<LoginForm>,
) -> Outcome {
    use actix_web::http::StatusCode;
    let form = form.into_inner();
    let expected = req.cookie(LOGIN_COOKIE).map(|c| c.value().to_owned());
    if !expected.is_some_and(|t| !t.is_empty() && same_token(&t, &form.csrf)) {
        return login_again(
            &req,
            &state,
            &form.email,
            "The sign-in form had expired. Please try again.",
            "",
            StatusCode::FORBIDDEN,
        );
    }
    if form.email.trim().is_empty() {
        let msg = "Enter your email address.";
        return login_again(&req, &state, "", msg, "email", StatusCode::BAD_REQUEST);
    }
    let address = client_address(&req, state.config.http.trust_forwarded_for);
    let limits = state.config.auth.login_limits();
    let checked =
        sign_in::check_password(&state.pool, limits, &address, &form.email, form.password).await;
    let creds = match checked {
        Ok(creds) => creds,
        Err(e @ (Error::Unauthorized(_) | Error::TooManyRequests { .. })) => {
            let status = e.code().status();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED);
            return login_again(
                &req,
                &state,
                &form.email,
                &e.to_string(),
                "password",
                status,
            );
        }
        Err(Error::Validation { field, detail, .. }) => {
            let field = field.unwrap_or_default();
            let msg = super::plain(&detail);
            let status = StatusCode::BAD_REQUEST;
            return login_again(&req, &state, &form.email, &msg, &field, status);
        }
        Err(e) => return Err(e.into()),
    };
    let (token, digest) = tokens::new_refresh_token();
    let (csrf, _) = tokens::new_refresh_token();
    let life = state.config.auth.console_lifetime();
    sign_in::open_console(&state.pool, &creds, digest, csrf, life).await?;
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/console/dashboard"))
        .finish();
    res.add_cookie(&cookie(&req, &state, SESSION_COOKIE, token))
        .map_err(Error::internal)?;
    res.add_cookie(&removal(&req, &state, LOGIN_COOKIE))
        .map_err(Error::internal)?;
    Ok(res)
}

/// `POST /console/logout`: ends the console session and its sign-in.
pub async fn logout(req: HttpRequest, state: web::Data<AppState>, _: Posted<NoFields>) -> Outcome {
    if let Some(token) = req.cookie(SESSION_COOKIE) {
        end(&state, tokens::refresh_digest(token.value())).await?;
    }
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/console/login"))
        .finish();
    res.add_cookie(&removal(&req, &state, SESSION_COOKIE))
        .map_err(Error::internal)?;
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("", "a"));
    }

    #[test]
    fn the_form_token_is_read_from_the_body() {
        assert_eq!(form_token(b"a=1&csrf=xyz&b=2").as_deref(), Some("xyz"));
        assert_eq!(form_token(b"a=1"), None);
    }
}
