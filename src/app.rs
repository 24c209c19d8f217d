//! Builds and runs the actix application. `main` and the tests share it.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::http::{header, KeepAlive, StatusCode};
use actix_web::middleware::{from_fn, DefaultHeaders, ErrorHandlers};
use actix_web::{web, App, HttpServer};

use crate::auth::tokens::TokenKeys;
use crate::config::Config;
use crate::db::replica;
use crate::http;
use crate::state::AppState;
use crate::telemetry;
use domain::customers::PaymentDesk;
use domain::db::Pool;
use domain::sales::desk::SaleDesk;
use domain::sync::live::Live;
use domain::sync::push::PushDesk;
use domain::Registry;

/// A started server and the actor registry it feeds.
pub struct Running {
    pub server: actix_web::dev::Server,
    pub registry: Arc<Registry>,
    pub port: u16,
}

/// Starts the HTTP server on `listener`. Must run inside an actix `System`
/// (the actors live on its arbiters).
pub fn start(config: Config, pool: Pool, listener: TcpListener) -> std::io::Result<Running> {
    let port = listener.local_addr()?.port();
    let registry = Arc::new(Registry::new(pool.clone(), config.runtime()));
    crate::tuning::spawn(&registry, pool.clone(), &config);
    crate::fiscal::spawn_worker(&config, pool.clone())?;
    crate::fiscal::spawn_metrics(&config, pool.clone());
    crate::maintenance::spawn(pool.clone());
    let workers = match config.http.workers {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
        n => n,
    };
    let shutdown = config.http.shutdown_timeout_secs;
    let http_cfg = config.http.clone();
    let live = Live::start(
        pool.clone(),
        config.database.url.clone(),
        config.sync.max_parked_polls,
    );
    let replica = replica::from_config(&config.database).map_err(std::io::Error::other)?;
    if let Some(r) = &replica {
        replica::spawn_checks(r);
    }
    let state = web::Data::new(AppState {
        pool,
        live,
        replica,
        actors: registry.clone(),
        sales: Arc::new(SaleDesk::new(config.actors.sale_batch_max)),
        payments: Arc::new(PaymentDesk::new(config.actors.sale_batch_max)),
        pushes: Arc::new(PushDesk::new(config.actors.push_runs_max)),
        tokens: TokenKeys::new(&config.auth),
        config: Arc::new(config),
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .wrap(
                ErrorHandlers::new()
                    .handler(StatusCode::METHOD_NOT_ALLOWED, http::method_not_allowed),
            )
            .wrap(from_fn(http::body_deadline::body_deadline))
            .wrap(from_fn(telemetry::request_context))
            // No answer may be read as another type than it declares
            // (a JSON body sniffed as HTML, say).
            .wrap(DefaultHeaders::new().add((header::X_CONTENT_TYPE_OPTIONS, "nosniff")))
            .configure(http::configure)
            .configure(http::docs::configure)
            .configure(crate::console::configure)
            .configure(http::problems::configure)
            .default_service(web::to(http::not_found))
    })
    .client_request_timeout(Duration::from_millis(http_cfg.client_request_timeout_ms))
    .client_disconnect_timeout(Duration::from_millis(http_cfg.client_disconnect_timeout_ms))
    .keep_alive(keep_alive(http_cfg.keep_alive_secs))
    .listen(listener)?
    .workers(workers)
    .shutdown_timeout(shutdown)
    .run();
    Ok(Running {
        server,
        registry,
        port,
    })
}

/// The keep-alive setting: `secs` of idleness, or none at 0.
fn keep_alive(secs: u64) -> KeepAlive {
    match secs {
        0 => KeepAlive::Disabled,
        s => KeepAlive::Timeout(Duration::from_secs(s)),
    }
}

/// Runs until SIGTERM/SIGINT: in-flight requests finish, then the actors'
/// mailboxes drain.
pub async fn serve(config: Config, pool: Pool) -> std::io::Result<()> {
    let listener = TcpListener::bind((config.http.host.as_str(), config.http.port))?;
    let drain = Duration::from_secs(config.http.shutdown_timeout_secs);
    tracing::info!(address = %listener.local_addr()?, "listening");
    let running = start(config, pool, listener)?;
    running.server.await?;
    tracing::info!("HTTP server stopped; draining actor mailboxes");
    running.registry.drain(drain).await;
    Ok(())
}
