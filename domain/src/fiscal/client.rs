//! Talking to EFRIS: one POST of an envelope per interface call, the server
//! time (`T101`) and the symmetric key (`T104`) as the protocol asks, the
//! key renewed when the authority says it expired, and every answer sorted
//! into accepted, already received, transient or rejected.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use rsa::RsaPrivateKey;
use serde_json::{json, Value};
use tokio::sync::Mutex;
use uuid::Uuid;

use super::envelope::{self, AesKey, Envelope, GlobalInfo, ReturnStateInfo};

/// The answer codes the client acts on besides success. The authority's
/// code table names many rejections; these are the ones that are not.
pub mod codes {
    /// The symmetric key expired: fetch a new one (`T104`) and resend.
    pub const KEY_EXPIRED: &str = "402";
    /// The document was received before: query it (`T106`) and take the
    /// first answer's identifiers.
    pub const ALREADY_RECEIVED: &str = "2253";
    /// The authority is busy or down on its side: try again later.
    pub const SYSTEM_BUSY: &str = "99";
}

/// Who the client speaks for.
#[derive(Clone)]
pub struct ClientConfig {
    /// The interface's URL (`…/efrisws/ws/taapp/getInformation`).
    pub url: String,
    pub tin: String,
    pub brn: String,
    pub app_id: String,
    pub version: String,
    pub user_name: String,
    pub device_mac: String,
    /// The taxpayer's key: signs every request and opens `T104`'s key.
    pub private_key: Option<Arc<RsaPrivateKey>>,
    /// Whether contents are AES encrypted with the `T104` key.
    pub encrypt: bool,
    /// How long one call may take before it counts as a timeout.
    pub timeout: Duration,
}

/// What one submission came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted: the authority's identifiers, those the interface gives.
    Accepted(Identifiers),
    /// Already received (and reconciled by a query into `Accepted` by
    /// the worker).
    AlreadyReceived { code: String, message: String },
    /// Worth trying again: a timeout, a dropped connection, 5xx, 429.
    Transient {
        code: Option<String>,
        message: String,
    },
    /// Refused: the authority's code and message.
    Rejected { code: String, message: String },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identifiers {
    pub fdn: Option<String>,
    pub verification_code: Option<String>,
    pub qr_code: Option<String>,
    pub reference_no: Option<String>,
}

pub struct Client {
    http: reqwest::Client,
    config: ClientConfig,
    key: Mutex<Option<AesKey>>,
}

impl Client {
    pub fn new(config: ClientConfig) -> Result<Client, String> {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Client {
            http,
            config,
            key: Mutex::new(None),
        })
    }

    /// The taxpayer's TIN the documents are sent for.
    pub fn tin(&self) -> &str {
        &self.config.tin
    }

    /// Calls `interface` for `device_no` with `content` (JSON). Transport
    /// failures and 5xx/429 are `Err(Transient)`; otherwise the answer's
    /// state and its content.
    async fn call(
        &self,
        interface: &str,
        device_no: &str,
        content: &Value,
        encrypted: bool,
    ) -> Result<(ReturnStateInfo, Value), Outcome> {
        let key = if encrypted {
            self.key(device_no).await?
        } else {
            None
        };
        let text = content.to_string();
        let data = envelope::seal(
            text.as_bytes(),
            key.as_ref(),
            self.config.private_key.as_deref(),
        );
        let request = Envelope {
            data,
            global_info: self.global_info(interface, device_no),
            return_state_info: ReturnStateInfo::default(),
        };
        let answer = self
            .http
            .post(&self.config.url)
            .json(&request)
            .send()
            .await
            .map_err(|e| transient(None, format!("{interface}: {e}")))?;
        let status = answer.status();
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(transient(
                Some(status.as_u16().to_string()),
                format!("{interface}: the authority answered HTTP {status}"),
            ));
        }
        let body: Envelope = answer
            .json()
            .await
            .map_err(|e| transient(None, format!("{interface}: unreadable answer: {e}")))?;
        let state = body.return_state_info.clone();
        if body.data.content.is_empty() {
            return Ok((state, Value::Null));
        }
        let raw = envelope::open(&body.data, key.as_ref(), None)
            .map_err(|e| transient(None, format!("{interface}: {e}")))?;
        let value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Ok((state, value))
    }

    fn global_info(&self, interface: &str, device_no: &str) -> GlobalInfo {
        let c = &self.config;
        GlobalInfo {
            app_id: c.app_id.clone(),
            version: c.version.clone(),
            data_exchange_id: Uuid::now_v7().simple().to_string(),
            interface_code: interface.to_owned(),
            request_code: "TP".to_owned(),
            request_time: Utc::now().format("%Y-%m-%d %H:%M:%S").to_string(),
            response_code: "TA".to_owned(),
            user_name: c.user_name.clone(),
            device_mac: c.device_mac.clone(),
            device_no: device_no.to_owned(),
            tin: c.tin.clone(),
            brn: c.brn.clone(),
            taxpayer_id: "1".to_owned(),
            longitude: "0".to_owned(),
            latitude: "0".to_owned(),
            extend_field: Value::Null,
        }
    }

    /// The symmetric key, fetched through `T101` and `T104` when there is
    /// none yet.
    async fn key(&self, device_no: &str) -> Result<Option<AesKey>, Outcome> {
        let mut held = self.key.lock().await;
        if let Some(k) = held.as_ref() {
            return Ok(Some(k.clone()));
        }
        let Some(private) = self.config.private_key.clone() else {
            return Err(Outcome::Rejected {
                code: "config".to_owned(),
                message: "encryption is on but no private key is configured".to_owned(),
            });
        };
        // The protocol starts with the server time; a clock far off is
        // refused by the authority, so it is logged.
        let (state, time) = Box::pin(self.call("T101", device_no, &json!({}), false)).await?;
        if state.return_code == envelope::SUCCESS {
            tracing::debug!(server_time = %time["currentTime"], "EFRIS server time");
        }
        let (state, content) = Box::pin(self.call("T104", device_no, &json!({}), false)).await?;
        if state.return_code != envelope::SUCCESS {
            return Err(transient(
                Some(state.return_code),
                format!("T104: {}", state.return_message),
            ));
        }
        let wrapped = content["passowrdDes"].as_str().unwrap_or_default();
        let key = envelope::unwrap_key(&private, wrapped)
            .map_err(|e| transient(None, format!("T104: {e}")))?;
        *held = Some(key.clone());
        Ok(Some(key))
    }

    /// Submits one document's content through its interface.
    pub async fn submit(&self, interface: &str, device_no: &str, content: &Value) -> Outcome {
        for _ in 0..2 {
            let answer = self
                .call(interface, device_no, content, self.config.encrypt)
                .await;
            let (state, body) = match answer {
                Ok(a) => a,
                Err(outcome) => return outcome,
            };
            match state.return_code.as_str() {
                envelope::SUCCESS => return accepted(interface, &body),
                codes::KEY_EXPIRED => {
                    *self.key.lock().await = None;
                    continue;
                }
                codes::ALREADY_RECEIVED => {
                    return Outcome::AlreadyReceived {
                        code: state.return_code,
                        message: state.return_message,
                    }
                }
                codes::SYSTEM_BUSY => {
                    return transient(Some(state.return_code), state.return_message)
                }
                _ => {
                    // T130 and T131 answer per line: an empty list is success.
                    return Outcome::Rejected {
                        code: state.return_code,
                        message: state.return_message,
                    };
                }
            }
        }
        transient(
            Some(codes::KEY_EXPIRED.to_owned()),
            "the symmetric key expired twice in a row".to_owned(),
        )
    }

    /// Asks the authority for a document it already holds, by the seller's
    /// reference (`T106` for invoices and credit notes): its identifiers,
    /// or `None` when it has none.
    pub async fn query(
        &self,
        interface: &str,
        device_no: &str,
        reference: &str,
    ) -> Result<Option<Identifiers>, Outcome> {
        let content = json!({"referenceNo": reference, "interfaceCode": interface});
        let (state, body) = self
            .call("T106", device_no, &content, self.config.encrypt)
            .await?;
        if state.return_code != envelope::SUCCESS {
            return Err(transient(Some(state.return_code), state.return_message));
        }
        let first = body["records"].get(0).cloned().unwrap_or(Value::Null);
        if first.is_null() {
            return Ok(None);
        }
        match accepted(interface, &first) {
            Outcome::Accepted(ids) => Ok(Some(ids)),
            _ => Ok(None),
        }
    }
}

fn transient(code: Option<String>, message: String) -> Outcome {
    Outcome::Transient { code, message }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The identifiers out of an accepted answer's content.
fn accepted(interface: &str, body: &Value) -> Outcome {
    let ids = match interface {
        "T109" => Identifiers {
            fdn: text(&body["basicInformation"]["invoiceNo"]),
            verification_code: text(&body["basicInformation"]["antifakeCode"]),
            qr_code: text(&body["summary"]["qrCode"]),
            reference_no: None,
        },
        "T110" => Identifiers {
            reference_no: text(&body["referenceNo"]),
            ..Identifiers::default()
        },
        _ => {
            // Goods and stock answer with the lines that failed.
            if let Some(failed) = body.as_array().and_then(|a| a.first()) {
                return Outcome::Rejected {
                    code: text(&failed["returnCode"]).unwrap_or_else(|| "line".to_owned()),
                    message: text(&failed["returnMessage"])
                        .unwrap_or_else(|| "a line was refused".to_owned()),
                };
            }
            Identifiers::default()
        }
    };
    let complete = match interface {
        "T109" => ids.fdn.is_some() && ids.verification_code.is_some() && ids.qr_code.is_some(),
        "T110" => ids.reference_no.is_some(),
        _ => true,
    };
    if complete {
        Outcome::Accepted(ids)
    } else {
        transient(
            None,
            format!("{interface}: an accepted answer without its identifiers"),
        )
    }
}
