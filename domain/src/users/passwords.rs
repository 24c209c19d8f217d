//! argon2id password hashes (PHC strings). Hashing is CPU-heavy, so callers
//! run it on the blocking pool.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

use crate::{Error, Result};

/// Shortest new password, in characters.
pub const MIN_PASSWORD_LEN: usize = 8;
/// Longest new password, in bytes (what the hash reads): as many
/// characters of ASCII, fewer of other scripts.
pub const MAX_PASSWORD_BYTES: usize = 256;

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

/// The rules of a new password (at least [`MIN_PASSWORD_LEN`] characters,
/// at most [`MAX_PASSWORD_BYTES`] bytes);
/// a 400 names `password`.
pub fn validate_new(password: &str) -> Result<()> {
    validate_new_as(password, "password")
}

/// The same rules, naming `field` on a 400 (`new_password` for a change).
pub fn validate_new_as(password: &str, field: &str) -> Result<()> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(Error::validation(
            field,
            format!("`{field}` must be at least {MIN_PASSWORD_LEN} characters long."),
        ));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(Error::validation(
            field,
            format!("`{field}` is too long (at most {MAX_PASSWORD_BYTES} bytes)."),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{validate_new, validate_new_as};
    use crate::{Error, Result};

    fn field_of(r: Result<()>) -> Option<String> {
        match r {
            Err(Error::Validation { field, .. }) => field,
            _ => None,
        }
    }

    #[test]
    fn new_passwords_need_eight_characters_and_name_the_field() {
        assert!(validate_new_as("12345678", "new_password").is_ok());
        assert!(validate_new_as("äöüßäöüß", "new_password").is_ok());
        assert_eq!(
            field_of(validate_new_as("1234567", "new_password")).as_deref(),
            Some("new_password")
        );
        assert_eq!(field_of(validate_new("short")).as_deref(), Some("password"));
        assert_eq!(
            field_of(validate_new_as(&"x".repeat(257), "new_password")).as_deref(),
            Some("new_password")
        );
    }
}
