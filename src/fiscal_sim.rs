//! `pharmacy fiscal-sim`: the tax authority's side of the EFRIS interfaces
//! the outbox uses, with the same envelope. It checks signatures and field
//! rules, hands out the symmetric key (`T104`) and the server time (`T101`),
//! issues FDNs, verification codes and QR payloads for invoices (`T109`),
//! reference numbers for credit notes (`T110`), takes goods (`T130`) and
//! stock (`T131`) documents, answers a repeated seller reference with its
//! first document, answers queries (`T106`), and counts everything for
//! tests (`GET /sim/stats`). Faults are injected by rate: answers delayed,
//! failed (503), rejected, or held past the client's timeout after the
//! document was recorded. `POST /sim/config` changes the rates while it
//! runs.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use chrono::Utc;
use domain::fiscal::client::codes;
use domain::fiscal::envelope::{self, AesKey, Envelope, ReturnStateInfo};
use rand::Rng;
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::{RsaPrivateKey, RsaPublicKey};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The development key pair: the taxpayer's key the in-process simulator
/// and a development server share. Refused in production like the default
/// JWT secret.
pub const DEV_KEY_PEM: &str = include_str!("../config/fiscal-dev-key.pem");

/// The fault rates, each between 0 and 1.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    pub latency_ms: u64,
    pub fail_rate: f64,
    pub reject_rate: f64,
    pub timeout_rate: f64,
    /// How long an answer "timed out" is held (longer than the client waits).
    pub hold_ms: u64,
    /// Answer a repeat with "already received" instead of the first
    /// document (as the authority does for some interfaces), so the client
    /// must query.
    pub repeat_as_error: bool,
    /// Throw away the symmetric key: the next encrypted call is told it
    /// expired.
    pub expire_key: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Documents received (first submissions and repeats).
    pub received: u64,
    /// Distinct documents recorded, by interface.
    pub documents: HashMap<String, u64>,
    pub fdns_issued: u64,
    pub repeats: u64,
    pub rejections: u64,
    pub failures: u64,
    pub timeouts: u64,
    pub queries: u64,
    pub keys_issued: u64,
}

struct State {
    faults: Faults,
    stats: Stats,
    key: AesKey,
    /// First answers by interface and seller reference.
    answers: HashMap<(String, String), Value>,
    /// FDNs issued (credit notes must name one).
    fdns: HashMap<String, String>,
    next_fdn: u64,
}

pub struct Sim {
    state: Mutex<State>,
    taxpayer: RsaPublicKey,
}

impl Sim {
    pub fn new(taxpayer: RsaPublicKey, faults: Faults) -> Sim {
        Sim {
            state: Mutex::new(State {
                faults,
                stats: Stats::default(),
                key: AesKey::random(),
                answers: HashMap::new(),
                fdns: HashMap::new(),
                // FDNs of one simulator run start at its start time in
                // microseconds: a database that outlives a simulator (the
                // development service restarted on its own database, the
                // bench's servers one after another) never meets the same
                // FDN twice, which its unique index would refuse forever.
                next_fdn: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(1)),
            }),
            taxpayer,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

/// The taxpayer's public key from a PEM file (public or private key), or
/// the development key.
pub fn taxpayer_key(path: Option<&std::path::Path>) -> Result<RsaPublicKey, String> {
    let pem = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => DEV_KEY_PEM.to_owned(),
    };
    if let Ok(k) = RsaPublicKey::from_public_key_pem(&pem) {
        return Ok(k);
    }
    RsaPrivateKey::from_pkcs8_pem(&pem)
        .map(|k| k.to_public_key())
        .map_err(|e| format!("not an RSA key in PEM: {e}"))
}

/// Starts the simulator on `listener` in the current actix system.
pub fn start(sim: Arc<Sim>, listener: TcpListener) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::from(sim);
    Ok(HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::JsonConfig::default().limit(8 * 1024 * 1024))
            .route(
                "/efrisws/ws/taapp/getInformation",
                web::post().to(interface),
            )
            .route("/sim/stats", web::get().to(stats))
            .route("/sim/config", web::post().to(configure))
    })
    .workers(1)
    .shutdown_timeout(1)
    .listen(listener)?
    .run())
}

async fn stats(sim: web::Data<Sim>) -> HttpResponse {
    HttpResponse::Ok().json(sim.with(|s| s.stats.clone()))
}

async fn configure(sim: web::Data<Sim>, body: web::Json<Faults>) -> HttpResponse {
    let faults = body.into_inner();
    sim.with(|s| {
        if faults.expire_key {
            s.key = AesKey::random();
        }
        s.faults = Faults {
            expire_key: false,
            ..faults
        };
    });
    HttpResponse::Ok().json(sim.with(|s| s.faults.clone()))
}

fn answer(
    request: &Envelope,
    code: &str,
    message: &str,
    content: Option<(&Value, Option<&AesKey>)>,
) -> HttpResponse {
    let data = match content {
        Some((v, key)) => envelope::seal(v.to_string().as_bytes(), key, None),
        None => envelope::Data::default(),
    };
    HttpResponse::Ok().json(Envelope {
        data,
        global_info: envelope::GlobalInfo {
            request_code: "TA".to_owned(),
            response_code: "TP".to_owned(),
            request_time: Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
            ..request.global_info.clone()
        },
        return_state_info: ReturnStateInfo {
            return_code: code.to_owned(),
            return_message: message.to_owned(),
        },
    })
}

/// What the dice said for this call.
enum Fault {
    None,
    Fail,
    Reject,
    Timeout(u64),
}

async fn interface(sim: web::Data<Sim>, body: web::Json<Envelope>) -> HttpResponse {
    let request = body.into_inner();
    let code = request.global_info.interface_code.clone();
    let faults = sim.with(|s| s.faults.clone());
    if faults.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(faults.latency_ms)).await;
    }
    if code == "T101" {
        let now = json!({"currentTime": Utc::now().format("%d/%m/%Y %H:%M:%S").to_string()});
        return answer(&request, envelope::SUCCESS, "SUCCESS", Some((&now, None)));
    }
    if code == "T104" {
        let key = sim.with(|s| {
            s.stats.keys_issued += 1;
            s.key.clone()
        });
        return match envelope::wrap_key(&sim.taxpayer, &key) {
            Ok(wrapped) => {
                let content = json!({"passowrdDes": wrapped, "sign": ""});
                answer(
                    &request,
                    envelope::SUCCESS,
                    "SUCCESS",
                    Some((&content, None)),
                )
            }
            Err(e) => answer(&request, "99", &e.to_string(), None),
        };
    }
    let dice = {
        let mut rng = rand::thread_rng();
        if rng.gen::<f64>() < faults.fail_rate {
            Fault::Fail
        } else if rng.gen::<f64>() < faults.timeout_rate {
            Fault::Timeout(faults.hold_ms.max(1))
        } else if rng.gen::<f64>() < faults.reject_rate {
            Fault::Reject
        } else {
            Fault::None
        }
    };
    if matches!(dice, Fault::Fail) {
        sim.with(|s| s.stats.failures += 1);
        return HttpResponse::ServiceUnavailable().body("simulated failure");
    }
    if request.data.signature.is_empty()
        || envelope::verify(
            &sim.taxpayer,
            &request.data.content,
            &request.data.signature,
        )
        .is_err()
    {
        sim.with(|s| s.stats.rejections += 1);
        return answer(
            &request,
            "11",
            "The signature does not match the content.",
            None,
        );
    }
    let key = sim.with(|s| s.key.clone());
    let encrypted = request.data.data_description.code_type == "1";
    let raw = match envelope::open(&request.data, Some(&key), None) {
        Ok(raw) => raw,
        Err(_) if encrypted => {
            return answer(
                &request,
                codes::KEY_EXPIRED,
                "The symmetric key has expired.",
                None,
            )
        }
        Err(e) => return answer(&request, "12", &e.to_string(), None),
    };
    let Ok(content) = serde_json::from_slice::<Value>(&raw) else {
        return answer(&request, "13", "The content is not JSON.", None);
    };
    let reply_key = encrypted.then_some(&key);
    if code == "T106" {
        let reference = content["referenceNo"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let asked = content["interfaceCode"]
            .as_str()
            .unwrap_or("T109")
            .to_owned();
        let found = sim.with(|s| {
            s.stats.queries += 1;
            s.answers.get(&(asked, reference)).cloned()
        });
        let records = json!({"records": found.into_iter().collect::<Vec<_>>()});
        return answer(
            &request,
            envelope::SUCCESS,
            "SUCCESS",
            Some((&records, reply_key)),
        );
    }
    if let Err(why) = check(&code, &request, &content, &sim) {
        sim.with(|s| {
            s.stats.received += 1;
            s.stats.rejections += 1;
        });
        return answer(&request, why.0, &why.1, None);
    }
    if matches!(dice, Fault::Reject) {
        sim.with(|s| {
            s.stats.received += 1;
            s.stats.rejections += 1;
        });
        return answer(
            &request,
            "2124",
            "goodsDetails-->itemCode: simulated rejection",
            None,
        );
    }
    let reference = reference_of(&code, &content);
    let (reply, repeat) = sim.with(|s| record(s, &code, &reference, &content));
    if let Fault::Timeout(hold) = dice {
        // Recorded, but the answer comes too late for the client.
        sim.with(|s| s.stats.timeouts += 1);
        tokio::time::sleep(Duration::from_millis(hold)).await;
    }
    if repeat && faults.repeat_as_error && (code == "T109" || code == "T110") {
        return answer(
            &request,
            codes::ALREADY_RECEIVED,
            "The document was received before.",
            None,
        );
    }
    answer(
        &request,
        envelope::SUCCESS,
        "SUCCESS",
        Some((&reply, reply_key)),
    )
}

fn reference_of(code: &str, content: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match code {
        "T109" => text(&content["sellerDetails"]["referenceNo"]),
        "T110" => text(&content["sellersReferenceNo"]),
        // Goods and stock documents carry no reference of their own: the
        // same content sent again is the same document.
        _ => content.to_string(),
    }
}

/// The field rules the simulator holds documents to.
fn check(
    code: &str,
    request: &Envelope,
    c: &Value,
    sim: &Sim,
) -> Result<(), (&'static str, String)> {
    let tin = &request.global_info.tin;
    if tin.is_empty() {
        return Err(("14", "globalInfo-->tin: cannot be empty".to_owned()));
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match code {
        "T109" => {
            if text(&c["sellerDetails"]["tin"]) != *tin {
                return Err((
                    "2001",
                    "sellerDetails-->tin: does not match globalInfo-->tin".to_owned(),
                ));
            }
            if text(&c["sellerDetails"]["referenceNo"]).is_empty() {
                return Err((
                    "2002",
                    "sellerDetails-->referenceNo: cannot be empty".to_owned(),
                ));
            }
            let goods = c["goodsDetails"].as_array().cloned().unwrap_or_default();
            if goods.is_empty() {
                return Err(("2003", "goodsDetails: cannot be empty".to_owned()));
            }
            let sum: Decimal = goods
                .iter()
                .filter_map(|g| text(&g["total"]).parse::<Decimal>().ok())
                .sum();
            let gross: Decimal = text(&c["summary"]["grossAmount"])
                .parse()
                .unwrap_or_default();
            if (sum - gross).abs() > Decimal::new(1, 2) {
                return Err((
                    "2004",
                    format!("summary-->grossAmount: {gross} is not the sum of the lines ({sum})"),
                ));
            }
        }
        "T110" => {
            let fdn = text(&c["oriInvoiceNo"]);
            if fdn.is_empty() || !sim.with(|s| s.fdns.contains_key(&fdn)) {
                return Err(("2005", format!("oriInvoiceNo: '{fdn}' names no invoice")));
            }
            if text(&c["sellersReferenceNo"]).is_empty() {
                return Err(("2006", "sellersReferenceNo: cannot be empty".to_owned()));
            }
        }
        "T130" => {
            if text(&c["goodsCode"]).is_empty() || text(&c["goodsName"]).is_empty() {
                return Err(("2007", "goodsCode, goodsName: cannot be empty".to_owned()));
            }
        }
        "T131" => {
            let op = text(&c["goodsStockIn"]["operationType"]);
            if op != "101" && op != "102" {
                return Err((
                    "2008",
                    "goodsStockIn-->operationType: must be 101 or 102".to_owned(),
                ));
            }
            if c["goodsStockInItem"].as_array().is_none_or(Vec::is_empty) {
                return Err(("2009", "goodsStockInItem: cannot be empty".to_owned()));
            }
        }
        other => return Err(("15", format!("interfaceCode {other} is not served"))),
    }
    Ok(())
}

/// Records a document (or finds its first answer): the answer content and
/// whether it was a repeat.
fn record(s: &mut State, code: &str, reference: &str, content: &Value) -> (Value, bool) {
    s.stats.received += 1;
    let key = (code.to_owned(), reference.to_owned());
    if let Some(first) = s.answers.get(&key) {
        s.stats.repeats += 1;
        return (first.clone(), true);
    }
    *s.stats.documents.entry(code.to_owned()).or_default() += 1;
    let reply = match code {
        "T109" => {
            let fdn = format!("3{:016}", s.next_fdn);
            s.next_fdn += 1;
            let vc: String = {
                let mut rng = rand::thread_rng();
                (0..20)
                    .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
                    .collect()
            };
            let qr = format!(
                "SIMULATED|https://efris.ura.go.ug/site_mobile/#/invoiceValidation?invoiceNo={fdn}&antiFakeCode={vc}"
            );
            s.stats.fdns_issued += 1;
            s.fdns.insert(fdn.clone(), reference.to_owned());
            json!({
                "basicInformation": {"invoiceNo": fdn, "antifakeCode": vc,
                                     "invoiceId": uuid::Uuid::now_v7().simple().to_string()},
                "sellerDetails": content["sellerDetails"],
                "summary": {"qrCode": qr, "grossAmount": content["summary"]["grossAmount"]},
            })
        }
        "T110" => {
            json!({"referenceNo": format!("CN{:010}", s.stats.documents.get("T110").copied().unwrap_or(0))})
        }
        _ => json!([]),
    };
    s.answers.insert(key, reply.clone());
    (reply, false)
}
