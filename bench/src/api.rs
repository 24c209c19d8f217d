//! A thin JSON client for `/api/v1`.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use reqwest::Method;
use serde_json::{json, Value};

#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
}

impl Api {
    pub fn new(base: String) -> Result<Api> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(1024)
            .tcp_nodelay(true)
            .build()?;
        Ok(Api { http, base })
    }

    pub fn rebase(&mut self, base: String) {
        self.base = base;
    }

    /// Sends a request; answers the status and the JSON body (`Null` if none).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req.send().await.with_context(|| format!("send {path}"))?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await?;
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, value))
    }

    /// POST that must succeed (2xx); answers the body.
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Result<Value> {
        let (status, value) = self
            .call(Method::POST, path, Some(token), Some(&body))
            .await?;
        if !(200..300).contains(&status) {
            bail!("POST {path} answered {status}: {value}");
        }
        Ok(value)
    }

    pub async fn login(&self, email: &str, password: &str) -> Result<String> {
        let (status, value) = self
            .call(
                Method::POST,
                "/auth/login",
                None,
                Some(&json!({"email": email, "password": password})),
            )
            .await?;
        if status != 200 {
            bail!("login of {email} answered {status}: {value}");
        }
        value["access_token"]
            .as_str()
            .map(str::to_owned)
            .context("login answered no access_token")
    }
}

/// The `id` of a created object.
pub fn id(v: &Value) -> Result<String> {
    v["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no id in {v}"))
}
