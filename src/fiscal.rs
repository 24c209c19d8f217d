//! Starting the fiscal outbox's worker beside the other background tasks,
//! and, in development without `fiscal.mode`, the simulator it talks to.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use domain::db::Pool;
use domain::fiscal::client::{Client, ClientConfig};
use domain::fiscal::worker::{self, WorkerConfig};
use rsa::pkcs8::DecodePrivateKey;
use rsa::RsaPrivateKey;

use crate::config::{AppEnv, Config, FiscalMode};
use crate::fiscal_sim::{self, Faults, Sim};

/// In development with `fiscal.mode` unset: starts the simulator on a free
/// local port in the current actix system and points the outbox at it.
/// Returns the simulator's address when it started one.
pub fn dev_simulator(config: &mut Config) -> std::io::Result<Option<String>> {
    if config.env != AppEnv::Development || config.fiscal.mode.is_some() {
        return Ok(None);
    }
    let key = fiscal_sim::taxpayer_key(None).map_err(std::io::Error::other)?;
    let listener = TcpListener::bind(("127.0.0.1", 0))?;
    let base = format!("http://127.0.0.1:{}", listener.local_addr()?.port());
    let server = fiscal_sim::start(Arc::new(Sim::new(key, Faults::default())), listener)?;
    actix_web::rt::spawn(server);
    let efris = &mut config.fiscal.efris;
    efris.url = format!("{base}/efrisws/ws/taapp/getInformation");
    efris.simulated = true;
    if efris.tin.is_empty() {
        efris.tin = "1000000000".to_owned();
    }
    if efris.default_device_no.is_empty() {
        efris.default_device_no = "SIM-DEVICE-1".to_owned();
    }
    config.fiscal.mode = Some(FiscalMode::Efris);
    Ok(Some(base))
}

/// Starts the worker when `fiscal.mode` is `efris`. Documents are queued
/// whatever the mode; with none or `off` they wait.
pub fn spawn_worker(config: &Config, pool: Pool) -> std::io::Result<()> {
    if config.fiscal.mode != Some(FiscalMode::Efris) {
        return Ok(());
    }
    let efris = &config.fiscal.efris;
    let pem = match &efris.private_key_path {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
        None => fiscal_sim::DEV_KEY_PEM.to_owned(),
    };
    let key = RsaPrivateKey::from_pkcs8_pem(&pem)
        .map_err(|e| std::io::Error::other(format!("fiscal.efris.private_key_path: {e}")))?;
    let client = Client::new(ClientConfig {
        url: efris.url.clone(),
        tin: efris.tin.clone(),
        brn: efris.brn.clone(),
        app_id: efris.app_id.clone(),
        version: efris.version.clone(),
        user_name: efris.user_name.clone(),
        device_mac: efris.device_mac.clone(),
        private_key: Some(Arc::new(key)),
        encrypt: efris.encrypt,
        timeout: Duration::from_millis(efris.timeout_ms),
    })
    .map_err(std::io::Error::other)?;
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "server".to_owned());
    let worker = WorkerConfig {
        process: format!(
            "{host}:{}:{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ),
        lease: Duration::from_secs(efris.lease_secs),
        idle: Duration::from_millis(efris.idle_ms),
        batch: efris.batch,
        backoff_base: Duration::from_millis(efris.backoff_base_ms),
        backoff_cap: Duration::from_secs(efris.backoff_cap_secs),
        devices: efris.devices.clone().into_iter().collect(),
        default_device: efris.default_device_no.clone(),
        simulated: efris.simulated,
    };
    actix_web::rt::spawn(worker::run(pool, Arc::new(client), worker));
    Ok(())
}

/// Refreshes the outbox's gauges every 15 seconds, whatever the mode:
/// documents pile up unsent when it is off too.
pub fn spawn_metrics(config: &Config, pool: Pool) {
    domain::fiscal::metrics::init(config.fiscal.alert_after_secs);
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(15));
        loop {
            tick.tick().await;
            if let Err(e) = domain::fiscal::metrics::refresh(&pool).await {
                tracing::debug!(error = %e, "fiscal gauges not refreshed");
            }
        }
    });
}
