//! Who is calling: the bearer-token extractor, the role guard and the branch
//! scope rule every handler uses.

// Passwords are the domain's (sign-in and user writes check and hash them).
pub use domain::users::passwords;
pub mod tokens;

use std::future::Future;
use std::pin::Pin;

use actix_web::{dev::Payload, http::header, web, FromRequest, HttpRequest};
use deadpool_postgres::GenericClient;
use domain::db::Pool;
use uuid::Uuid;

use crate::state::AppState;
use domain::role::Action;
use domain::users::sessions;
use domain::{Acting, Error, Result, Role};

/// The authenticated caller. Extracting it checks the token, that the user
/// is still active, that the token's `token_version` is the user's current
/// one (a password, role or branch change, a deactivation or a refresh-token
/// reuse ends every earlier token) and that its session was not logged out,
/// all in one statement, so each of these stops a token at once.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: Uuid,
    pub role: Role,
    pub branch_id: Uuid,
    pub org_id: Uuid,
    /// The sign-in session (refresh-token family) of the token.
    pub session_id: Uuid,
    /// The user's token version the token carries (the current one).
    pub token_version: i64,
}

impl Caller {
    /// The staff member the domain's use cases act for.
    pub fn acting(&self) -> Acting {
        Acting {
            user_id: self.user_id,
            role: self.role,
            branch_id: self.branch_id,
            org_id: self.org_id,
        }
    }

    /// Whether the caller may act on any branch (see [`Acting::any_branch`]).
    pub fn any_branch(&self) -> bool {
        self.acting().any_branch()
    }

    /// 403 unless the role policy lets the caller's role take `action`.
    pub fn require(&self, action: Action) -> Result<()> {
        self.acting().require(action)
    }

    /// The branch a request acts on (see [`Acting::branch_scope`]).
    pub fn branch_scope(&self, requested: Option<Uuid>) -> Result<Uuid> {
        self.acting().branch_scope(requested)
    }

    /// For lists: `None` means every branch (an admin who named none).
    pub fn branch_filter(&self, requested: Option<Uuid>) -> Result<Option<Uuid>> {
        self.acting().branch_filter(requested)
    }

    /// Whether the caller may see an object of `branch_id`.
    pub fn can_see_branch(&self, branch_id: Uuid) -> bool {
        self.acting().can_see_branch(branch_id)
    }
}

/// The client address used for rate limits: the peer, or with
/// `trust_forwarded` (behind a trusted proxy) the forwarded address.
pub fn client_address(req: &HttpRequest, trust_forwarded: bool) -> String {
    if trust_forwarded {
        if let Some(ip) = req.connection_info().realip_remote_addr() {
            return ip.to_owned();
        }
    }
    req.peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn bearer(req: &HttpRequest) -> Result<String> {
    let value = req.headers().get(header::AUTHORIZATION).ok_or_else(|| {
        Error::Unauthorized("Sign in first: the Authorization header is missing.".to_owned())
    })?;
    let value = value
        .to_str()
        .map_err(|_| Error::Unauthorized("The Authorization header is malformed.".to_owned()))?;
    let (scheme, token) = value.split_once(' ').ok_or_else(|| {
        Error::Unauthorized("The Authorization header must be `Bearer <token>`.".to_owned())
    })?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(Error::Unauthorized(
            "The Authorization header must be `Bearer <token>`.".to_owned(),
        ));
    }
    Ok(token.trim().to_owned())
}

impl FromRequest for Caller {
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Caller>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let signed = Signed::of(req);
        Box::pin(async move {
            let state = state.ok_or_else(|| Error::internal("application state missing"))?;
            let claimed = signed?.claimed;
            load_active(
                &state,
                claimed.user_id,
                claimed.session_id,
                claimed.token_version,
            )
            .await
        })
    }
}

/// A caller whose token is verified (signature, lifetime, audience) but
/// whose account and session are not checked yet. `check_with` checks them
/// pipelined with the request's first statement on one connection, so the
/// check costs the request no round trip and no connection of its own. The
/// hot reads take it, and the sales and payments, whose caller check goes
/// with their group's first statement; every other route takes [`Caller`].
pub struct Signed {
    claimed: Caller,
}

impl Signed {
    fn of(req: &HttpRequest) -> Result<Signed> {
        let state = req
            .app_data::<web::Data<AppState>>()
            .ok_or_else(|| Error::internal("application state missing"))?;
        let claims = state.tokens.verify_access(&bearer(req)?)?;
        let invalid = || Error::Unauthorized("The access token is invalid.".to_owned());
        let uuid = |s: &str| Uuid::parse_str(s).map_err(|_| invalid());
        Ok(Signed {
            claimed: Caller {
                user_id: uuid(&claims.sub)?,
                role: claims.role,
                branch_id: uuid(&claims.branch_id)?,
                org_id: uuid(&claims.org_id)?,
                session_id: uuid(&claims.sid)?,
                token_version: claims.ver,
            },
        })
    }

    /// The caller as its token states it. Exact whenever the check passes:
    /// every change of role or branch bumps the user's token version
    /// (`sql/0013_token_lifetime.sql`), which the check compares.
    pub fn claimed(&self) -> &Caller {
        &self.claimed
    }

    /// Sends the caller check, then `first`, on `client` (one round trip for
    /// both), and answers the checked caller with `first`'s output. The
    /// check decides first: a refused caller gets its 401 whatever `first`
    /// found, and nothing of it is shown.
    pub async fn check_with<C, T, F>(self, client: &C, first: F) -> Result<(Caller, T)>
    where
        C: GenericClient + Sync,
        F: Future<Output = Result<T>>,
    {
        let c = self.claimed;
        let (state, found) = futures_util::join!(
            sessions::token_state(client, c.user_id, c.session_id),
            first
        );
        let caller = verdict(state?, c.user_id, c.session_id, c.token_version)?;
        Ok((caller, found?))
    }

    /// The checked caller from a token state its read brought back in the
    /// same statement (`sessions::token_subquery`); the 401 when it does
    /// not stand.
    pub fn decide(self, state: Option<sessions::TokenState>) -> Result<Caller> {
        let c = self.claimed;
        verdict(state, c.user_id, c.session_id, c.token_version)
    }

    /// What the check compares, for a request whose first statement runs
    /// elsewhere (a branch's group writer checks it there).
    pub fn signer(&self) -> sessions::Signer {
        sessions::Signer {
            user_id: self.claimed.user_id,
            session_id: self.claimed.session_id,
            token_version: self.claimed.token_version,
        }
    }

    /// `decided` itself, unless it is a refusal: then the check runs alone
    /// first (a round trip), so a dead token still gets its 401 before any
    /// other answer, as with [`Caller`].
    pub async fn refuse_after_check<T>(&self, pool: &Pool, decided: Result<T>) -> Result<T> {
        if decided.is_err() {
            let c = &self.claimed;
            let client = pool.get().await?;
            let state = sessions::token_state(&client, c.user_id, c.session_id).await?;
            verdict(state, c.user_id, c.session_id, c.token_version)?;
        }
        decided
    }
}

impl FromRequest for Signed {
    type Error = Error;
    type Future = std::future::Ready<Result<Signed>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Signed::of(req))
    }
}

/// Current role and branch come from the database, not the token, so role
/// changes and deactivation take effect on the next request. One statement
/// reads the user and the token's session. The console's session check
/// ends here too.
pub(crate) async fn load_active(
    state: &AppState,
    user_id: Uuid,
    session_id: Uuid,
    token_version: i64,
) -> Result<Caller> {
    let client = state.pool.get().await?;
    let row = sessions::token_state(&client, user_id, session_id).await?;
    verdict(row, user_id, session_id, token_version)
}

/// The caller of a token of `token_version` in session `session_id`, if
/// the token still stands on what the database says (`sessions::standing`).
fn verdict(
    row: Option<sessions::TokenState>,
    user_id: Uuid,
    session_id: Uuid,
    token_version: i64,
) -> Result<Caller> {
    let row = sessions::standing(row, token_version)?;
    Ok(Caller {
        user_id,
        role: Role::parse(&row.role)
            .ok_or_else(|| Error::internal(format!("unknown role {}", row.role)))?,
        branch_id: row.branch_id,
        org_id: row.org_id,
        session_id,
        token_version,
    })
}
