//! Layered configuration: the built-in `config/default.toml`, then
//! `config/<APP_ENV>.toml` and `config/local.toml` when present, then the
//! environment (`PHARMACY__SECTION__KEY`, plus `DATABASE_URL`,
//! `DATABASE_READ_URL`, `HOST`, `PORT`, `JWT_SECRET`, `APP_ENV`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use serde::Deserialize;

pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");
pub const DEFAULT_JWT_SECRET: &str = "dev-only-secret-change-me-in-production";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppEnv {
    Development,
    Production,
}

#[derive(Clone, Deserialize)]
pub struct Config {
    pub env: AppEnv,
    pub http: HttpConfig,
    pub database: DatabaseConfig,
    pub devdb: DevDbConfig,
    pub auth: AuthConfig,
    pub actors: ActorsConfig,
    pub log: LogConfig,
    pub marketing: MarketingConfig,
    #[serde(default)]
    pub sync: SyncConfig,
    #[serde(default)]
    pub fiscal: FiscalConfig,
}

/// Whether fiscal documents go to the tax authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FiscalMode {
    /// Documents are queued and never sent.
    Off,
    /// Documents are sent to EFRIS (or a simulator) at `fiscal.efris.url`.
    Efris,
}

/// The fiscal outbox (`docs/fiscal.md`). Unset `mode` in development starts
/// the simulator in-process; production refuses to start without it.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct FiscalConfig {
    pub mode: Option<FiscalMode>,
    /// A document unfinished for longer than this raises the alert.
    pub alert_after_secs: u64,
    pub efris: EfrisConfig,
}

impl Default for FiscalConfig {
    fn default() -> Self {
        FiscalConfig {
            mode: None,
            alert_after_secs: 6 * 3600,
            efris: EfrisConfig::default(),
        }
    }
}

/// The EFRIS device this service speaks as, and how the worker paces itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct EfrisConfig {
    /// The interface's URL (`…/efrisws/ws/taapp/getInformation`).
    pub url: String,
    /// The taxpayer's TIN and business registration number.
    pub tin: String,
    pub brn: String,
    pub app_id: String,
    /// The interface version sent in `globalInfo.version`.
    pub version: String,
    pub user_name: String,
    pub device_mac: String,
    /// Each branch's EFRIS device number, by branch code.
    pub devices: BTreeMap<String, String>,
    /// The device number of documents of no branch or an unlisted one.
    pub default_device_no: String,
    /// The taxpayer's private key (PKCS#8 PEM) that signs every request.
    pub private_key_path: Option<PathBuf>,
    /// Whether contents are AES encrypted with the `T104` key.
    pub encrypt: bool,
    pub timeout_ms: u64,
    pub lease_secs: u64,
    pub idle_ms: u64,
    pub batch: i64,
    pub backoff_base_ms: u64,
    pub backoff_cap_secs: u64,
    /// Set when the URL is the simulator: receipts then say SIMULATED.
    pub simulated: bool,
}

impl Default for EfrisConfig {
    fn default() -> Self {
        EfrisConfig {
            url: String::new(),
            tin: String::new(),
            brn: String::new(),
            app_id: "AP04".to_owned(),
            version: "1.1.20191201".to_owned(),
            user_name: "admin".to_owned(),
            device_mac: "FFFFFFFFFFFF".to_owned(),
            devices: BTreeMap::new(),
            default_device_no: String::new(),
            private_key_path: None,
            encrypt: true,
            timeout_ms: 10_000,
            lease_secs: 60,
            idle_ms: 500,
            batch: 20,
            backoff_base_ms: 1_000,
            backoff_cap_secs: 600,
            simulated: false,
        }
    }
}

/// The change feed's long polls.
#[derive(Debug, Clone, Deserialize)]
pub struct SyncConfig {
    /// Most `GET /sync/changes?wait=` polls one process holds parked at
    /// once; more get 503 with Retry-After.
    pub max_parked_polls: usize,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            max_parked_polls: 10_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct HttpConfig {
    pub host: String,
    pub port: u16,
    pub workers: usize,
    pub body_limit_bytes: usize,
    pub push_body_limit_bytes: usize,
    pub shutdown_timeout_secs: u64,
    pub trust_forwarded_for: bool,
    /// Time a client has to send a request's head (request line and
    /// headers), from its connection or from the end of the previous
    /// request; 408 and close after it. 0 disables.
    pub client_request_timeout_ms: u64,
    /// Time a closing connection waits for the client to go; 0 disables.
    pub client_disconnect_timeout_ms: u64,
    /// How long an idle keep-alive connection stays open; 0 disables
    /// keep-alive.
    pub keep_alive_secs: u64,
    /// Time a client has to send a whole request body; 408 and close after it.
    pub body_timeout_secs: u64,
    /// The same for `POST /sync/push`, whose bodies may be 8 MiB.
    pub push_body_timeout_secs: u64,
}

#[derive(Clone, Deserialize)]
pub struct DatabaseConfig {
    pub url: Option<String>,
    pub pool_size: usize,
    pub pool_wait_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub statement_timeout_ms: u64,
    /// A streaming standby for the reads that may lag (reports, dashboard,
    /// compliance books and their CSV exports, the sync snapshot). Unset:
    /// every read goes to `url`.
    #[serde(default)]
    pub read_url: Option<String>,
    /// The most the standby may be behind, in seconds, for those reads to
    /// go to it; beyond, they go to the primary until it catches up.
    #[serde(default = "default_replica_max_lag_secs")]
    pub replica_max_lag_secs: f64,
    /// How often the standby's lag is measured, in ms.
    #[serde(default = "default_replica_check_ms")]
    pub replica_check_ms: u64,
    /// How long a snapshot read waits for the standby to replay the
    /// primary's settled change log before reading the primary instead, in ms.
    #[serde(default = "default_replica_snapshot_wait_ms")]
    pub replica_snapshot_wait_ms: u64,
}

fn default_replica_max_lag_secs() -> f64 {
    5.0
}

fn default_replica_check_ms() -> u64 {
    1000
}

fn default_replica_snapshot_wait_ms() -> u64 {
    500
}

#[derive(Debug, Clone, Deserialize)]
pub struct DevDbConfig {
    pub dir: PathBuf,
    pub port: u16,
    pub database: String,
}

#[derive(Clone, Deserialize)]
pub struct AuthConfig {
    pub jwt_secret: String,
    pub issuer: String,
    pub audience: String,
    pub access_token_minutes: i64,
    pub refresh_token_days: i64,
    pub leeway_secs: u64,
    pub login_failures_per_email: i32,
    pub login_failures_per_address: i32,
    pub login_window_secs: i64,
    /// A console (browser) session unused for this many seconds is ended.
    pub console_idle_secs: i64,
    /// A console session ends this many seconds after sign-in, however
    /// busy it is.
    pub console_max_age_secs: i64,
}

impl AuthConfig {
    /// How long a console session lives (each limit at least a second).
    pub fn console_lifetime(&self) -> domain::users::console_sessions::Lifetime {
        domain::users::console_sessions::Lifetime {
            idle_secs: self.console_idle_secs.max(1),
            max_age_secs: self.console_max_age_secs.max(1),
        }
    }

    /// The login rate limits (the API's login, the console's sign-in and a
    /// password change share them).
    pub fn login_limits(&self) -> domain::users::sign_in::LoginLimits {
        domain::users::sign_in::LoginLimits {
            failures_per_email: self.login_failures_per_email,
            failures_per_address: self.login_failures_per_address,
            window_secs: self.login_window_secs,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ActorsConfig {
    pub branch_mailbox: usize,
    pub device_mailbox: usize,
    pub arbiters: usize,
    /// Most REST sales of one branch made in one transaction (1 = no batching).
    pub sale_batch_max: usize,
    /// Most tills' runs of pushed sales of one branch made in one
    /// transaction (1 = each till's run alone).
    #[serde(default = "default_push_runs_max")]
    pub push_runs_max: usize,
    /// How often each process reloads the per-branch overrides stored in
    /// the database (`PUT /ops/actors/branches/{id}`), in ms.
    #[serde(default = "default_overrides_reload_ms")]
    pub overrides_reload_ms: u64,
    /// Static per-branch overrides keyed by branch code (any case):
    /// `[actors.branches.MAIN] mailbox = 512, sale_batch_max = 64`. An
    /// override stored in the database wins over these, field by field.
    #[serde(default)]
    pub branches: BTreeMap<String, BranchActorsConfig>,
}

fn default_push_runs_max() -> usize {
    domain::sync::push::RUNS_PER_COMMIT
}

fn default_overrides_reload_ms() -> u64 {
    2000
}

/// One branch's static actor tuning; an absent field keeps the default.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchActorsConfig {
    /// Mailbox capacity, 1..100000.
    #[serde(alias = "capacity")]
    pub mailbox: Option<usize>,
    /// Group-commit size, 1..1024.
    pub sale_batch_max: Option<usize>,
}

/// The bounds of a branch's mailbox capacity and group-commit size, in
/// configuration and in `PUT /ops/actors/branches/{id}` alike.
pub use domain::actor_tuning::{MAILBOX_RANGE, SALE_BATCH_RANGE};

/// Limits on the public `POST /marketing/contact`.
#[derive(Debug, Clone, Deserialize)]
pub struct MarketingConfig {
    pub enquiries_per_email: i32,
    pub enquiries_per_address: i32,
    pub window_secs: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LogConfig {
    pub format: String,
    pub level: String,
}

// Secrets never reach a log line, even through `{:?}`.
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("env", &self.env)
            .field("http", &self.http)
            .field("database.url", &self.database.url.as_ref().map(|_| "<set>"))
            .field(
                "database.read_url",
                &self.database.read_url.as_ref().map(|_| "<set>"),
            )
            .field("database.pool_size", &self.database.pool_size)
            .field("actors", &self.actors)
            .field("log", &self.log)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid configuration: {0}")]
    Invalid(#[from] Box<figment::Error>),
    #[error("refusing to start in production with the default JWT secret: set JWT_SECRET")]
    DefaultSecretInProduction,
    #[error("invalid configuration: {0}")]
    OutOfRange(String),
    #[error("refusing to start in production without `fiscal.mode` (off or efris)")]
    FiscalModeUnset,
}

impl Config {
    /// Loads the layered configuration from `config/` (or `PHARMACY_CONFIG_DIR`)
    /// and the environment.
    pub fn load() -> Result<Config, ConfigError> {
        let dir = std::env::var_os("PHARMACY_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("config"));
        let app_env = std::env::var("APP_ENV").unwrap_or_else(|_| "development".to_owned());
        let figment = Figment::from(Toml::string(DEFAULT_TOML))
            .merge(Toml::file(dir.join(format!("{app_env}.toml"))))
            .merge(Toml::file(dir.join("local.toml")))
            .merge(Env::prefixed("PHARMACY__").split("__"))
            .merge(
                Env::raw()
                    .only(&["DATABASE_URL"])
                    .map(|_| "database.url".into()),
            )
            .merge(
                Env::raw()
                    .only(&["DATABASE_READ_URL"])
                    .map(|_| "database.read_url".into()),
            )
            .merge(Env::raw().only(&["HOST"]).map(|_| "http.host".into()))
            .merge(Env::raw().only(&["PORT"]).map(|_| "http.port".into()))
            .merge(
                Env::raw()
                    .only(&["JWT_SECRET"])
                    .map(|_| "auth.jwt_secret".into()),
            )
            .merge(Env::raw().only(&["APP_ENV"]).map(|_| "env".into()));
        let config: Config = figment.extract().map_err(Box::new)?;
        config.validate()?;
        Ok(config)
    }

    /// The built-in defaults alone, for tests and tools.
    #[allow(
        clippy::expect_used,
        reason = "the defaults are a file compiled into the binary; a unit test loads them"
    )]
    pub fn defaults() -> Config {
        Figment::from(Toml::string(DEFAULT_TOML))
            .extract()
            .expect("the built-in default configuration is valid")
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.env == AppEnv::Production && self.auth.jwt_secret == DEFAULT_JWT_SECRET {
            return Err(ConfigError::DefaultSecretInProduction);
        }
        if self.env == AppEnv::Production && self.fiscal.mode.is_none() {
            return Err(ConfigError::FiscalModeUnset);
        }
        if self.env == AppEnv::Production
            && self.fiscal.mode == Some(FiscalMode::Efris)
            && self.fiscal.efris.private_key_path.is_none()
        {
            return Err(ConfigError::OutOfRange(
                "fiscal.efris.private_key_path is required in production (the development key \
                 signs only for the simulator)"
                    .to_owned(),
            ));
        }
        if self.fiscal.mode == Some(FiscalMode::Efris)
            && self.fiscal.efris.lease_secs * 1000 <= self.fiscal.efris.timeout_ms
        {
            return Err(ConfigError::OutOfRange(
                "fiscal.efris.lease_secs must outlast fiscal.efris.timeout_ms".to_owned(),
            ));
        }
        self.database.validate()?;
        self.actors.validate()
    }

    /// The static branch overrides, keyed by upper-case branch code.
    pub fn branch_overrides(&self) -> BTreeMap<String, domain::BranchOverride> {
        self.actors
            .branches
            .iter()
            .map(|(code, b)| {
                let o = domain::BranchOverride {
                    mailbox: b.mailbox,
                    batch_max: b.sale_batch_max,
                };
                (code.trim().to_uppercase(), o)
            })
            .collect()
    }

    pub fn runtime(&self) -> domain::RuntimeConfig {
        domain::RuntimeConfig {
            branch_mailbox: self.actors.branch_mailbox,
            device_mailbox: self.actors.device_mailbox,
            arbiters: self.actors.arbiters,
        }
    }
}

impl DatabaseConfig {
    /// The read replica's URL, when one is set (a blank value is none).
    pub fn read_url(&self) -> Option<&str> {
        self.read_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
    }

    /// The replica bounds: a lag bound of 0 or more seconds, a check period
    /// of at least 10 ms.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.replica_max_lag_secs.is_finite() && self.replica_max_lag_secs >= 0.0) {
            return Err(ConfigError::OutOfRange(
                "database.replica_max_lag_secs must be a number of seconds, 0 or more".to_owned(),
            ));
        }
        if self.replica_check_ms < 10 {
            return Err(ConfigError::OutOfRange(
                "database.replica_check_ms must be at least 10".to_owned(),
            ));
        }
        Ok(())
    }
}

impl ActorsConfig {
    /// Static overrides within the bounds the API enforces.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (code, b) in &self.branches {
            let bad = |key: &str, range: &std::ops::RangeInclusive<usize>| {
                ConfigError::OutOfRange(format!(
                    "actors.branches.{code}.{key} must be from {} to {}",
                    range.start(),
                    range.end()
                ))
            };
            if b.mailbox.is_some_and(|n| !MAILBOX_RANGE.contains(&n)) {
                return Err(bad("mailbox", &MAILBOX_RANGE));
            }
            if b.sale_batch_max
                .is_some_and(|n| !SALE_BATCH_RANGE.contains(&n))
            {
                return Err(bad("sale_batch_max", &SALE_BATCH_RANGE));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod actor_override_tests {
    use super::*;

    #[test]
    fn the_built_in_defaults_load_and_validate() {
        let config = Config::defaults();
        assert!(config.validate().is_ok());
    }

    #[test]
    fn a_read_replica_is_optional_and_a_blank_url_is_none() {
        let mut config = Config::defaults();
        assert_eq!(config.database.read_url(), None);
        assert_eq!(config.database.replica_max_lag_secs, 5.0);
        config.database.read_url = Some("  ".to_owned());
        assert_eq!(config.database.read_url(), None);
        config.database.read_url = Some(" postgres://standby/pharmacy ".to_owned());
        assert_eq!(
            config.database.read_url(),
            Some("postgres://standby/pharmacy")
        );
    }

    #[test]
    fn replica_bounds_out_of_range_are_refused() {
        for toml in [
            "[database]\nreplica_max_lag_secs = -1.0\n",
            "[database]\nreplica_max_lag_secs = nan\n",
            "[database]\nreplica_check_ms = 5\n",
        ] {
            let config: Config = Figment::from(Toml::string(DEFAULT_TOML))
                .merge(Toml::string(toml))
                .extract()
                .unwrap_or_else(|e| panic!("{e}"));
            let err = config.validate().err().map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.contains("database.replica")),
                "{toml}: {err:?}"
            );
        }
    }

    #[test]
    fn static_branch_overrides_parse_by_code_in_any_case() {
        let figment = Figment::from(Toml::string(DEFAULT_TOML)).merge(Toml::string(
            "[actors.branches.main]\nmailbox = 512\nsale_batch_max = 64\n\
             [actors.branches.VILLAGE]\ncapacity = 8\n",
        ));
        let config: Config = figment.extract().unwrap_or_else(|e| panic!("{e}"));
        assert!(config.validate().is_ok());
        let o = config.branch_overrides();
        assert_eq!(o["MAIN"].mailbox, Some(512));
        assert_eq!(o["MAIN"].batch_max, Some(64));
        assert_eq!(o["VILLAGE"].mailbox, Some(8));
        assert_eq!(o["VILLAGE"].batch_max, None);
        assert_eq!(config.actors.overrides_reload_ms, 2000);
    }

    #[test]
    fn static_branch_overrides_out_of_range_are_refused() {
        for (key, value) in [
            ("mailbox", 0),
            ("mailbox", 100_001),
            ("sale_batch_max", 0),
            ("sale_batch_max", 1025),
        ] {
            let toml = format!("[actors.branches.MAIN]\n{key} = {value}\n");
            let config: Config = Figment::from(Toml::string(DEFAULT_TOML))
                .merge(Toml::string(&toml))
                .extract()
                .unwrap_or_else(|e| panic!("{e}"));
            let err = config.validate().err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains(key)),
                "{key} = {value}: {err:?}"
            );
        }
    }
}
