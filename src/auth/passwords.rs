//! argon2id password hashes (PHC strings). Hashing is CPU-heavy, so callers
//! run it on the blocking pool.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

use actors::{Error, Result};

pub const MIN_PASSWORD_LEN: usize = 8;

pub fn hash(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(Error::internal)
}

/// True when `password` matches the stored PHC string.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// Hashes on the blocking pool so request workers keep serving.
pub async fn hash_blocking(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || hash(&password))
        .await
        .map_err(Error::internal)?
}

pub async fn verify_blocking(password: String, phc: String) -> bool {
    tokio::task::spawn_blocking(move || verify(&password, &phc))
        .await
        .unwrap_or(false)
}

/// A fixed hash to verify against when the email is unknown, so response
/// time does not reveal which emails exist.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash("decoy-password-never-matches").unwrap_or_default())
}

pub fn validate_new(password: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(Error::validation(
            "password",
            format!("The password must be at least {MIN_PASSWORD_LEN} characters long."),
        ));
    }
    if password.len() > 256 {
        return Err(Error::validation("password", "The password is too long."));
    }
    Ok(())
}
