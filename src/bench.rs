//! `bench-reports`: times the dashboard and every report through the real
//! HTTP app (in-process, on an ephemeral port) against the database, which
//! `seed-large` fills with a year of sales, and reports p50/p95/max. The
//! console's pages are timed the same way, signed in with a console session.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use uuid::Uuid;

use crate::app;
use crate::auth::tokens::TokenKeys;
use crate::config::Config;
use crate::seed::demo_email;
use domain::users;
use domain::users::console_sessions::{self, ConsoleSession};
use domain::users::sessions;
use domain::{db, Error, Result, Role};

/// One timed route.
#[derive(Debug)]
pub struct Figure {
    pub name: String,
    pub path: String,
    pub p50: Duration,
    pub p95: Duration,
    pub max: Duration,
    pub bytes: usize,
}

/// The data the run read: sales and sale lines in the database.
#[derive(Debug)]
pub struct DataSize {
    pub branches: i64,
    pub sales: i64,
    pub sale_lines: i64,
}

/// Calls every route `calls` times (after two warm-up calls) and measures
/// each call from connect to the last byte.
pub async fn bench_reports(
    config: Config,
    pool: Pool,
    calls: usize,
) -> Result<(DataSize, Vec<Figure>)> {
    let client = pool.get().await?;
    let tokens = TokenKeys::new(&config.auth);
    let admin = token(&client, &tokens, Role::Admin, "HQ").await?;
    let (manager, gen01) = {
        let email = demo_email(Role::BranchManager, "GEN01");
        let c = users::credentials(&client, &email).await?.ok_or_else(|| {
            Error::bad_request("No GEN01 branch: run `pharmacy seed-large` first.")
        })?;
        let session = sessions::open(&client, c.user.id, c.token_version).await?;
        let t = tokens.issue_access(
            c.user.id,
            Role::BranchManager,
            c.user.branch_id,
            c.org_id,
            session,
            c.token_version,
        )?;
        (t, c.user.branch_id)
    };
    let size = data_size(&client).await?;
    let year_ago = day_back(&client, 364).await?;
    let half_year_ago = day_back(&client, 182).await?;
    let idle = config.auth.console_lifetime();
    let console_admin = console_cookie(&client, Role::Admin, "HQ", idle).await?;
    let console_manager = console_cookie(&client, Role::BranchManager, "GEN01", idle).await?;
    let samples = samples(&client, gen01).await?;
    drop(client);
    // What a running service rolls up at start (0030), before the timing.
    domain::reports::roll_up_closed_months(&pool).await?;

    let listener = TcpListener::bind("127.0.0.1:0").map_err(Error::internal)?;
    let running = app::start(config, pool, listener).map_err(Error::internal)?;
    let (port, handle) = (running.port, running.server.handle());
    actix_web::rt::spawn(running.server);

    let mut figures = Vec::new();
    let mut all = cases(&admin, &manager, gen01, (&year_ago, &half_year_ago));
    all.extend(console_cases(&console_admin, &console_manager, gen01));
    all.extend(daily_cases(&console_admin, &console_manager, &samples));
    for (name, path, token) in all {
        figures.push(time(port, name, &path, token, calls).await?);
    }
    handle.stop(true).await;
    Ok((size, figures))
}

/// The figures as a text table, one route a line.
pub fn table(size: &DataSize, figures: &[Figure], calls: usize) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut out = format!(
        "{} active branches, {} sales, {} sale lines; {calls} calls per route\n{:<32} {:>8} {:>8} {:>8} {:>8}\n",
        size.branches, size.sales, size.sale_lines, "route", "p50 ms", "p95 ms", "max ms", "bytes"
    );
    for f in figures {
        out.push_str(&format!(
            "{:<32} {:>8.1} {:>8.1} {:>8.1} {:>8}   {}\n",
            f.name,
            ms(f.p50),
            ms(f.p95),
            ms(f.max),
            f.bytes,
            f.path
        ));
    }
    out
}

/// The routes: chain-wide as an admin, one branch as its manager, and the
/// year-long windows and past days the reports must answer fast.
fn cases<'a>(
    admin: &'a str,
    manager: &'a str,
    branch: Uuid,
    (year_ago, half_year_ago): (&str, &str),
) -> Vec<(&'static str, String, &'a str)> {
    vec![
        (
            "dashboard summary (chain)",
            "/dashboard/summary".into(),
            admin,
        ),
        (
            "dashboard summary (branch)",
            format!("/dashboard/summary?branch_id={branch}"),
            admin,
        ),
        (
            "branch comparison",
            "/dashboard/branch-comparison".into(),
            admin,
        ),
        ("sales report (chain)", "/reports/sales".into(), admin),
        (
            "sales report (branch manager)",
            "/reports/sales".into(),
            manager,
        ),
        (
            "sales by pharmacist",
            "/reports/sales/by-pharmacist".into(),
            admin,
        ),
        ("inventory (chain)", "/reports/inventory".into(), admin),
        (
            "inventory (branch ledger)",
            format!("/reports/inventory?branch_id={branch}"),
            admin,
        ),
        ("purchases", "/reports/purchases".into(), admin),
        ("vat", "/reports/vat".into(), admin),
        (
            "sales report, 12-month window",
            format!("/reports/sales?from_date={year_ago}"),
            admin,
        ),
        (
            "vat, 12-month window",
            format!("/reports/vat?from_date={year_ago}"),
            admin,
        ),
        (
            "sales, 12 months (manager)",
            format!("/reports/sales?from_date={year_ago}"),
            manager,
        ),
        (
            "margins, 12 months",
            format!("/reports/margins?from_date={year_ago}"),
            admin,
        ),
        (
            "margins by category, 12 mo",
            format!("/reports/margins?from_date={year_ago}&group_by=category"),
            admin,
        ),
        (
            "margins by day, 12 months",
            format!("/reports/margins?from_date={year_ago}&group_by=day"),
            admin,
        ),
        (
            "margins, 12 months (manager)",
            format!("/reports/margins?from_date={year_ago}"),
            manager,
        ),
        (
            "stock valuation today",
            "/reports/stock-valuation".into(),
            admin,
        ),
        (
            "stock valuation, year ago",
            format!("/reports/stock-valuation?as_of={year_ago}"),
            admin,
        ),
        (
            "stock valuation, 6 mo ago",
            format!("/reports/stock-valuation?as_of={half_year_ago}"),
            admin,
        ),
        (
            "valuation by category, 6 mo",
            format!("/reports/stock-valuation?as_of={half_year_ago}&group_by=category"),
            admin,
        ),
        (
            "stock valuation (manager)",
            format!("/reports/stock-valuation?as_of={half_year_ago}"),
            manager,
        ),
    ]
}

/// The console's pages (their paths start with `/console`; the token is a
/// console session cookie): each page group, chain-wide as an admin and
/// the dashboard and a report as a branch manager.
fn console_cases<'a>(
    admin: &'a str,
    manager: &'a str,
    branch: Uuid,
) -> Vec<(&'static str, String, &'a str)> {
    vec![
        (
            "console dashboard (chain)",
            "/console/dashboard".into(),
            admin,
        ),
        (
            "console dashboard (branch)",
            format!("/console/dashboard?branch_id={branch}"),
            admin,
        ),
        (
            "console dashboard (manager)",
            "/console/dashboard".into(),
            manager,
        ),
        (
            "console sales report",
            "/console/reports/sales".into(),
            admin,
        ),
        (
            "console sales report (manager)",
            "/console/reports/sales".into(),
            manager,
        ),
        (
            "console by pharmacist",
            "/console/reports/pharmacists".into(),
            admin,
        ),
        (
            "console inventory",
            "/console/reports/inventory".into(),
            admin,
        ),
        (
            "console purchases",
            "/console/reports/purchases".into(),
            admin,
        ),
        ("console vat", "/console/reports/vat".into(), admin),
        (
            "console prescription book",
            "/console/books/prescriptions".into(),
            admin,
        ),
        (
            "console classified register",
            "/console/books/classified".into(),
            admin,
        ),
        ("console conflicts", "/console/sync/conflicts".into(), admin),
        ("console devices", "/console/devices".into(), admin),
        ("console approvals", "/console/approvals".into(), admin),
        ("console operations", "/console/operations".into(), admin),
        ("console users", "/console/users".into(), admin),
        ("console branches", "/console/branches".into(), admin),
        ("console settings", "/console/settings".into(), admin),
        ("console audit log", "/console/audit".into(), admin),
    ]
}

/// One of each thing the pages of daily work show (a medicine stocked at
/// the branch, one of its latest sales, a customer, a supplier).
struct Samples {
    medicine: Uuid,
    sale: Uuid,
    customer: Uuid,
    supplier: Uuid,
}

async fn samples(c: &deadpool_postgres::Object, branch: Uuid) -> Result<Samples> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT (SELECT medicine_id FROM batches WHERE branch_id = {branch} AND qty_remaining > 0
                    LIMIT 1),
                  (SELECT id FROM sales WHERE branch_id = {branch} ORDER BY created_at DESC LIMIT 1),
                  (SELECT id FROM customers WHERE NOT is_deleted ORDER BY name LIMIT 1),
                  (SELECT id FROM suppliers WHERE NOT is_deleted ORDER BY name LIMIT 1)"#
    );
    let row = db::raw_opt(c, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("the samples returned no row"))?;
    let id = |i: usize| -> Result<Uuid> {
        row.get::<_, Option<Uuid>>(i)
            .ok_or_else(|| Error::bad_request("The data has no sale, customer or supplier to time: run `pharmacy seed-large` first."))
    };
    Ok(Samples {
        medicine: id(0)?,
        sale: id(1)?,
        customer: id(2)?,
        supplier: id(3)?,
    })
}

/// The console's pages of daily work: lists chain-wide as an admin, a
/// branch's own pages as its manager, and one record of each kind.
fn daily_cases<'a>(
    admin: &'a str,
    manager: &'a str,
    s: &Samples,
) -> Vec<(&'static str, String, &'a str)> {
    vec![
        ("console catalogue", "/console/medicines".into(), admin),
        (
            "console catalogue search",
            "/console/medicines?search=para".into(),
            admin,
        ),
        (
            "console medicine",
            format!("/console/medicines/{}", s.medicine),
            admin,
        ),
        ("console stock (manager)", "/console/stock".into(), manager),
        (
            "console stock expiring (manager)",
            "/console/stock?view=expiring".into(),
            manager,
        ),
        (
            "console stock count (manager)",
            "/console/stock/count".into(),
            manager,
        ),
        (
            "console transfers (manager)",
            "/console/transfers".into(),
            manager,
        ),
        ("console sales (manager)", "/console/sales".into(), manager),
        (
            "console sale",
            format!("/console/sales/{}", s.sale),
            manager,
        ),
        (
            "console returns (manager)",
            "/console/returns".into(),
            manager,
        ),
        (
            "console counter (manager)",
            "/console/counter".into(),
            manager,
        ),
        ("console customers", "/console/customers".into(), admin),
        (
            "console customer",
            format!("/console/customers/{}", s.customer),
            admin,
        ),
        ("console suppliers", "/console/suppliers".into(), admin),
        (
            "console supplier",
            format!("/console/suppliers/{}", s.supplier),
            admin,
        ),
        (
            "console purchase orders",
            "/console/purchase-orders".into(),
            admin,
        ),
        ("console fiscal queue", "/console/fiscal".into(), admin),
        (
            "console stock value",
            "/console/reports/stock-value".into(),
            admin,
        ),
        ("console margins", "/console/reports/margins".into(), admin),
    ]
}

async fn time(port: u16, name: &str, path: &str, token: &str, calls: usize) -> Result<Figure> {
    let mut bytes = 0;
    for _ in 0..2 {
        bytes = get(port, path, token).await?;
    }
    let mut took = Vec::with_capacity(calls);
    for _ in 0..calls.max(1) {
        let t = Instant::now();
        get(port, path, token).await?;
        took.push(t.elapsed());
    }
    took.sort();
    Ok(Figure {
        name: name.to_owned(),
        path: path.to_owned(),
        p50: percentile(&took, 50),
        p95: percentile(&took, 95),
        max: took.last().copied().unwrap_or_default(),
        bytes,
    })
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or_default()
}

/// One HTTP/1.1 GET; the body's size, or an error unless 200.
async fn get(port: u16, path: &str, token: &str) -> Result<usize> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(Error::internal)?;
    // A console page is asked for with its session cookie, the API with a
    // bearer token.
    let (target, credential) = match path.starts_with("/console") {
        true => (path.to_owned(), format!("Cookie: console_session={token}")),
        false => (
            format!("/api/v1{path}"),
            format!("Authorization: Bearer {token}"),
        ),
    };
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{credential}\r\n\
         Accept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(Error::internal)?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .map_err(Error::internal)?;
    let head = String::from_utf8_lossy(&response[..response.len().min(64)]).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        return Err(Error::internal(format!("GET {path} answered {head}")));
    }
    Ok(response.len())
}

/// An access token for the demo user of `role` at branch `code`.
async fn token(
    client: &deadpool_postgres::Object,
    tokens: &TokenKeys,
    role: Role,
    code: &str,
) -> Result<String> {
    let c = users::credentials(client, &demo_email(role, code))
        .await?
        .ok_or_else(|| Error::bad_request("No demo chain: run `pharmacy seed-large` first."))?;
    // A session of its own, as a login would open, so the token passes the
    // caller extractor's session and version check.
    let session = sessions::open(client, c.user.id, c.token_version).await?;
    tokens.issue_access(
        c.user.id,
        role,
        c.user.branch_id,
        c.org_id,
        session,
        c.token_version,
    )
}

/// A console session cookie for the demo user of `role` at branch `code`,
/// on a sign-in session of its own, as the sign-in form would open.
async fn console_cookie(
    client: &deadpool_postgres::Object,
    role: Role,
    code: &str,
    life: console_sessions::Lifetime,
) -> Result<String> {
    let c = users::credentials(client, &demo_email(role, code))
        .await?
        .ok_or_else(|| Error::bad_request("No demo chain: run `pharmacy seed-large` first."))?;
    let auth_session = sessions::open(client, c.user.id, c.token_version).await?;
    let (cookie, digest) = crate::auth::tokens::new_refresh_token();
    let (csrf, _) = crate::auth::tokens::new_refresh_token();
    let session = ConsoleSession {
        auth_session_id: auth_session,
        user_id: c.user.id,
        token_version: c.token_version,
        csrf_token: csrf,
    };
    console_sessions::open(client, digest, &session, life).await?;
    Ok(cookie)
}

async fn data_size(c: &deadpool_postgres::Object) -> Result<DataSize> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT (SELECT count(*) FROM branches WHERE is_active AND NOT is_deleted),
                  (SELECT count(*) FROM sales), (SELECT count(*) FROM sale_items)"#
    );
    let row = db::raw_opt(c, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("count returned no row"))?;
    Ok(DataSize {
        branches: row.get(0),
        sales: row.get(1),
        sale_lines: row.get(2),
    })
}

/// The day `days` before today (organisation time zone): 364 gives the
/// first day of the 365-day window ending today.
async fn day_back(c: &deadpool_postgres::Object, days: i32) -> Result<String> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT (org_today() - {days}::int)::text"
    );
    let row = db::raw_opt(c, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("org_today returned no row"))?;
    Ok(row.get(0))
}
