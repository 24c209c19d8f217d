//! The client loops of each scenario. Each client sends its next request
//! when the previous one answered, and records into its own tallies.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use rand::rngs::SmallRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use reqwest::header::{HeaderMap, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Method;
use serde_json::{json, Value};

use crate::load::{ClientOut, Window};
use crate::prep::World;

pub struct Ctx {
    pub http: reqwest::Client,
    pub base: String,
    pub world: World,
}

/// One request's answer: status (0 = none), headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub error: Option<String>,
}

pub async fn send(
    ctx: &Ctx,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Vec<u8>>,
) -> Answer {
    let mut req = ctx
        .http
        .request(method, format!("{}{path}", ctx.base))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.header(CONTENT_TYPE, "application/json").body(b);
    }
    match req.send().await {
        Ok(res) => {
            let status = res.status().as_u16();
            let headers = res.headers().clone();
            match res.bytes().await {
                Ok(b) => Answer {
                    status,
                    headers,
                    body: b.to_vec(),
                    error: None,
                },
                Err(e) => Answer {
                    status: 0,
                    headers,
                    body: Vec::new(),
                    error: Some(e.to_string()),
                },
            }
        }
        Err(e) => Answer {
            status: 0,
            headers: HeaderMap::new(),
            body: Vec::new(),
            error: Some(e.to_string()),
        },
    }
}

pub fn ok(status: u16) -> bool {
    (200..300).contains(&status)
}

pub fn describe(a: &Answer) -> String {
    match &a.error {
        Some(e) => format!("no answer: {e}"),
        None => format!(
            "{}: {}",
            a.status,
            String::from_utf8_lossy(&a.body[..a.body.len().min(300)])
        ),
    }
}

/// Whole-run bookkeeping of one answer (warm-up included).
fn account(out: &mut ClientOut, a: &Answer, units: u64) {
    if ok(a.status) {
        out.total_ok += 1;
        out.total_units += units;
    } else if a.status == 0 {
        out.total_unanswered += 1;
    }
}

/// `payments`, and `overload` (`overload = true`: 503 is the expected
/// refusal, timed apart from accepted payments and checked for Retry-After).
/// With `backoff`, a refused client waits as the `Retry-After` header says
/// (as a till would) before its next request; without, it retries at once.
/// With `own` (`payments-own`), a client pays only customers of its own
/// branch, as a till does; without, any customer of the chain.
pub async fn payments(
    i: usize,
    ctx: Arc<Ctx>,
    w: Window,
    overload: bool,
    backoff: bool,
    own: bool,
) -> Result<ClientOut> {
    let world = &ctx.world;
    let (b, nb) = (i % world.branches.len(), world.branches.len());
    let branch = &world.branches[b];
    // Customer `k` bought at branch `k % nb`: the own ones are b, b + nb, …
    let own_count = world.customers.len().saturating_sub(b).div_ceil(nb);
    let mut rng = SmallRng::seed_from_u64(i as u64 + 1);
    let mut out = ClientOut::default();
    while w.running() {
        let k = if own && own_count > 0 {
            b + nb * rng.gen_range(0..own_count)
        } else {
            rng.gen_range(0..world.customers.len())
        };
        let customer = &world.customers[k];
        let path = format!("/customers/{customer}/payments");
        let started = Instant::now();
        let a = send(
            &ctx,
            Method::POST,
            &path,
            &branch.token,
            Some(br#"{"amount":"1.00","notes":"bench"}"#.to_vec()),
        )
        .await;
        account(&mut out, &a, 1);
        let refused = overload && a.status == 503;
        if refused && a.headers.get(RETRY_AFTER).is_none() {
            out.bump("refused_without_retry_after", 1);
        }
        if w.counts(started) {
            out.tally("main").record(started, a.status, 1);
            if overload {
                let kind = if refused { "refused" } else { "accepted" };
                out.tally(kind).record(started, a.status, 1);
            }
            if !ok(a.status) && !refused {
                out.tally("main").sample(describe(&a));
            }
        }
        if refused && backoff {
            let secs: u64 = a
                .headers
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            // Tills spread their retries: a random part of the advised wait.
            let wait = std::time::Duration::from_millis(rng.gen_range(0..=secs.min(5) * 1000));
            tokio::time::sleep(wait.min(w.deadline.saturating_duration_since(Instant::now())))
                .await;
        }
    }
    Ok(out)
}

/// Three distinct cash-paid lines of the stocked medicines (the expensive
/// first one is left for credit).
fn sale_items(rng: &mut SmallRng, world: &World) -> Value {
    let choices = world.medicines.len() - 1;
    let lines: Vec<Value> = sample(rng, choices, 3.min(choices))
        .into_iter()
        .map(|m| json!({"medicine_id": world.medicines[m + 1], "quantity": 1}))
        .collect();
    Value::Array(lines)
}

/// Sales acknowledged to `fleet`'s sellers: sale id → (branch index, when
/// its answer arrived).
pub type Answered = std::sync::Mutex<std::collections::HashMap<String, (usize, Instant)>>;

/// `sales` (client `i` sells at branch `i % branches`) and `sales-hot`
/// (every client at the first branch).
pub async fn sales(i: usize, ctx: Arc<Ctx>, w: Window, hot: bool) -> Result<ClientOut> {
    sell(i, ctx, w, hot, None).await
}

/// `sales`, noting each acknowledged sale's id and answer time in `answered`.
pub async fn sales_noted(
    i: usize,
    ctx: Arc<Ctx>,
    w: Window,
    answered: Arc<Answered>,
) -> Result<ClientOut> {
    sell(i, ctx, w, false, Some(&answered)).await
}

async fn sell(
    i: usize,
    ctx: Arc<Ctx>,
    w: Window,
    hot: bool,
    answered: Option<&Answered>,
) -> Result<ClientOut> {
    let world = &ctx.world;
    let b = if hot { 0 } else { i % world.branches.len() };
    let branch = &world.branches[b];
    let mut rng = SmallRng::seed_from_u64(1000 + i as u64);
    let mut out = ClientOut::default();
    while w.running() {
        let body = json!({"items": sale_items(&mut rng, world), "payment_method": "cash"});
        let started = Instant::now();
        let a = send(
            &ctx,
            Method::POST,
            "/sales",
            &branch.token,
            Some(serde_json::to_vec(&body)?),
        )
        .await;
        let at = Instant::now();
        account(&mut out, &a, 1);
        if let (Some(noted), true) = (answered, ok(a.status)) {
            let sale: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
            match sale["id"].as_str() {
                Some(id) => {
                    if let Ok(mut m) = noted.lock() {
                        m.insert(id.to_owned(), (b, at));
                    }
                }
                None => out.fail(format!("a sale answered without an id: {}", describe(&a))),
            }
        }
        if w.counts(started) {
            out.tally("main").record(started, a.status, 1);
            if !ok(a.status) {
                out.tally("main").sample(describe(&a));
            }
        }
    }
    Ok(out)
}

/// `push`: client `i` is device `i`; it pushes a batch of `batch` new sales,
/// then replays the same batch, which must answer byte for byte the same.
pub async fn push(i: usize, ctx: Arc<Ctx>, w: Window, batch: usize) -> Result<ClientOut> {
    let world = &ctx.world;
    let (device, b) = &world.devices[i % world.devices.len()];
    let branch = &world.branches[*b];
    let mut rng = SmallRng::seed_from_u64(2000 + i as u64);
    let mut out = ClientOut::default();
    let mut seq = 0u64;
    while w.running() {
        let changes: Vec<Value> = (0..batch)
            .map(|_| {
                seq += 1;
                json!({"client_mutation_id": format!("{device}-{seq}"), "entity": "sale",
                       "op": "create",
                       "payload": {"items": sale_items(&mut rng, world), "payment_method": "cash"}})
            })
            .collect();
        let body = serde_json::to_vec(&json!({"device_id": device, "changes": changes}))?;
        let started = Instant::now();
        let first = send(
            &ctx,
            Method::POST,
            "/sync/push",
            &branch.token,
            Some(body.clone()),
        )
        .await;
        let answer: Value = serde_json::from_slice(&first.body).unwrap_or(Value::Null);
        let accepted = answer["accepted"].as_array().map_or(0, Vec::len) as u64;
        let rejected = answer["rejected"].as_array().map_or(0, Vec::len);
        account(&mut out, &first, accepted);
        if w.counts(started) {
            out.tally("batch").record(started, first.status, accepted);
        }
        if !ok(first.status) {
            out.tally("batch").sample(describe(&first));
            continue;
        }
        if rejected > 0 {
            out.fail(format!(
                "device {device}: {rejected} of {batch} changes rejected: {}",
                answer["rejected"][0]
            ));
        }
        let started = Instant::now();
        let replay = send(&ctx, Method::POST, "/sync/push", &branch.token, Some(body)).await;
        out.bump("replays", 1);
        if w.counts(started) {
            out.tally("replay").record(started, replay.status, 0);
        }
        if !ok(replay.status) {
            out.tally("replay").sample(describe(&replay));
            continue;
        }
        if replay.body != first.body {
            out.bump("replay_mismatch", 1);
            out.fail(format!(
                "device {device}: the replay answered differently:\n first  {}\n replay {}",
                String::from_utf8_lossy(&first.body[..first.body.len().min(300)]),
                String::from_utf8_lossy(&replay.body[..replay.body.len().min(300)])
            ));
        }
    }
    Ok(out)
}

/// `reads`: `GET /medicines/{id}` and `GET /customers/{id}`, alternately;
/// `medicine` (`medicines_only`): `GET /medicines/{id}` alone, as a cashier.
pub async fn reads(i: usize, ctx: Arc<Ctx>, w: Window, medicines_only: bool) -> Result<ClientOut> {
    let world = &ctx.world;
    let branch = &world.branches[i % world.branches.len()];
    let mut rng = SmallRng::seed_from_u64(3000 + i as u64);
    let mut out = ClientOut::default();
    let mut n = i;
    while w.running() {
        n += 1;
        let path = if medicines_only || n.is_multiple_of(2) {
            format!(
                "/medicines/{}",
                world.medicines[rng.gen_range(0..world.medicines.len())]
            )
        } else {
            format!(
                "/customers/{}",
                world.customers[rng.gen_range(0..world.customers.len())]
            )
        };
        let started = Instant::now();
        let a = send(&ctx, Method::GET, &path, &branch.token, None).await;
        account(&mut out, &a, 1);
        if w.counts(started) {
            out.tally("main").record(started, a.status, 1);
            if !ok(a.status) {
                out.tally("main").sample(describe(&a));
            }
        }
    }
    Ok(out)
}

/// `snapshot`: a till's `GET /sync/snapshot` (cashier of the first branch).
/// The first answer is checked to hold the whole catalogue.
pub async fn snapshot(i: usize, ctx: Arc<Ctx>, w: Window) -> Result<ClientOut> {
    let world = &ctx.world;
    let branch = &world.branches[i % world.branches.len()];
    let mut out = ClientOut::default();
    let mut checked = false;
    while w.running() {
        let started = Instant::now();
        let a = send(&ctx, Method::GET, "/sync/snapshot", &branch.token, None).await;
        // Units are the bytes of the answer, so units / requests is its size.
        let bytes = a.body.len() as u64;
        account(&mut out, &a, bytes);
        if w.counts(started) {
            out.tally("main").record(started, a.status, bytes);
        }
        if !ok(a.status) {
            out.tally("main").sample(describe(&a));
            continue;
        }
        if !checked {
            checked = true;
            let v: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
            let medicines = v["medicines"].as_array().map_or(0, Vec::len);
            if i == 0 {
                out.bump("medicines", medicines as u64);
            }
            if medicines < world.catalogue {
                out.fail(format!(
                    "the snapshot holds {medicines} medicines, the catalogue {}",
                    world.catalogue
                ));
            }
        }
    }
    Ok(out)
}

/// A page of the change feed, as much of it as a till's loop needs.
#[derive(serde::Deserialize)]
struct Page {
    changes: Vec<serde::de::IgnoredAny>,
    max_rev: i64,
    has_more: bool,
}

/// `sales+pull`'s tills: client `i` pulls the feed as the cashier of branch
/// `i % branches`, from `since`. A tight poller (`long = false`) asks again
/// as soon as it is answered; a long poller follows the till loop the
/// docs/sync.md recommends: `wait` up to 30 s, and after an answer with changes
/// (and no more pages) a pause of a second before the next long poll.
/// Tallies: `poll_empty` (a tight poll with nothing new: should answer in
/// a few ms), `poll` (a tight poll with changes), `long_poll`.
pub async fn pull(i: usize, ctx: Arc<Ctx>, w: Window, since: i64, long: bool) -> Result<ClientOut> {
    let world = &ctx.world;
    let branch = &world.branches[i % world.branches.len()];
    let mut out = ClientOut::default();
    let mut cursor = since;
    while w.running() {
        let left = w.deadline.saturating_duration_since(Instant::now());
        let wait = if long { left.as_secs().min(30) } else { 0 };
        if long && wait == 0 {
            break;
        }
        let path = format!("/sync/changes?since={cursor}&limit=500&wait={wait}");
        let started = Instant::now();
        let a = send(&ctx, Method::GET, &path, &branch.token, None).await;
        // Only the cursor and the count: parsing every change would make
        // the load generator compete with the server for the CPU.
        let page: Option<Page> = serde_json::from_slice(&a.body).ok();
        let changes = page.as_ref().map_or(0, |p| p.changes.len()) as u64;
        let kind = match (long, changes) {
            (true, _) => "long_poll",
            (false, 0) => "poll_empty",
            (false, _) => "poll",
        };
        if w.counts(started) {
            out.tally(kind).record(started, a.status, changes);
        }
        if !ok(a.status) {
            out.tally(kind).sample(describe(&a));
            continue;
        }
        let Some(page) = page else {
            out.fail(format!("not a page: {}", describe(&a)));
            continue;
        };
        if page.max_rev < cursor {
            out.fail(format!(
                "the cursor went back from {cursor} to {}",
                page.max_rev
            ));
        }
        cursor = page.max_rev;
        let more = page.has_more;
        if long && changes > 0 && !more {
            let pause = std::time::Duration::from_secs(1);
            tokio::time::sleep(pause.min(w.deadline.saturating_duration_since(Instant::now())))
                .await;
        }
    }
    Ok(out)
}
