//! Access tokens (HS256 JWT with explicit issuer, audience and leeway, per
//! RFC 8725) and opaque, single-use refresh tokens stored as SHA-256 digests.

use chrono::Utc;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::config::AuthConfig;
use domain::users::sign_in::TokenIssuer;
use domain::users::User;
use domain::{Error, Result, Role};

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    pub branch_id: String,
    pub org_id: String,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub jti: String,
    pub iss: String,
    pub aud: String,
    /// Always `access`: a refresh token is never a JWT, so it cannot pass here.
    pub typ: String,
    /// The sign-in session (refresh-token family) the token was issued in:
    /// logging out of it ends the token.
    pub sid: String,
    /// The user's `token_version` when the token was issued: a password,
    /// role or branch change, a deactivation or a refresh-token reuse bumps
    /// it and ends the token.
    pub ver: i64,
}

pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    issuer: String,
    audience: String,
    pub access_ttl_secs: i64,
    pub refresh_ttl_secs: i64,
}

impl TokenKeys {
    pub fn new(cfg: &AuthConfig) -> Self {
        // Only HS256 is accepted: `alg: none` and RS/HS confusion fail here.
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&cfg.issuer]);
        validation.set_audience(&[&cfg.audience]);
        validation.leeway = cfg.leeway_secs;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "nbf", "iat", "sub", "iss", "aud"]);
        TokenKeys {
            encoding: EncodingKey::from_secret(cfg.jwt_secret.as_bytes()),
            decoding: DecodingKey::from_secret(cfg.jwt_secret.as_bytes()),
            validation,
            issuer: cfg.issuer.clone(),
            audience: cfg.audience.clone(),
            access_ttl_secs: cfg.access_token_minutes.max(1) * 60,
            refresh_ttl_secs: cfg.refresh_token_days.max(1) * 86_400,
        }
    }

    pub fn issue_access(
        &self,
        user_id: Uuid,
        role: Role,
        branch_id: Uuid,
        org_id: Uuid,
        session_id: Uuid,
        token_version: i64,
    ) -> Result<String> {
        let now = Utc::now().timestamp();
        let claims = Claims {
            sub: user_id.to_string(),
            role,
            branch_id: branch_id.to_string(),
            org_id: org_id.to_string(),
            iat: now,
            nbf: now,
            exp: now + self.access_ttl_secs,
            jti: Uuid::now_v7().to_string(),
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            typ: "access".to_owned(),
            sid: session_id.to_string(),
            ver: token_version,
        };
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).map_err(Error::internal)
    }

    /// Checks signature, algorithm, expiry, not-before, issuer and audience.
    pub fn verify_access(&self, token: &str) -> Result<Claims> {
        let data = decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| Error::Unauthorized(describe(&e)))?;
        if data.claims.typ != "access" {
            return Err(Error::Unauthorized(
                "The token is not an access token.".to_owned(),
            ));
        }
        Ok(data.claims)
    }
}

/// The domain's sign-in use cases sign their tokens with these keys.
impl TokenIssuer for TokenKeys {
    fn access_token(
        &self,
        user: &User,
        org_id: Uuid,
        session: Uuid,
        token_version: i64,
    ) -> Result<String> {
        self.issue_access(
            user.id,
            user.role,
            user.branch_id,
            org_id,
            session,
            token_version,
        )
    }

    fn refresh_token(&self) -> (String, Vec<u8>) {
        new_refresh_token()
    }

    fn access_ttl_secs(&self) -> i64 {
        self.access_ttl_secs
    }

    fn refresh_ttl_secs(&self) -> i64 {
        self.refresh_ttl_secs
    }
}

fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "The access token has expired; sign in again or refresh it.",
        ErrorKind::ImmatureSignature => "The access token is not valid yet.",
        ErrorKind::InvalidIssuer | ErrorKind::InvalidAudience => {
            "The access token was not issued for this service."
        }
        _ => "The access token is invalid.",
    }
    .to_owned()
}

/// A fresh opaque refresh token and the digest stored for it.
pub fn new_refresh_token() -> (String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let token = hex::encode(bytes);
    let digest = refresh_digest(&token);
    (token, digest)
}

pub fn refresh_digest(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn access_tokens_carry_their_session_and_token_version() {
        let keys = TokenKeys::new(&Config::defaults().auth);
        let (user, branch, org, session) = (
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
            Uuid::now_v7(),
        );
        let token = keys
            .issue_access(user, Role::Cashier, branch, org, session, 7)
            .expect("token");
        let claims = keys.verify_access(&token).expect("valid");
        assert_eq!(claims.sub, user.to_string());
        assert_eq!(claims.sid, session.to_string());
        assert_eq!(claims.ver, 7);
    }
}
