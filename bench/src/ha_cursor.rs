//! A till's change-feed cursor across a drill: taken before the fault and
//! sent again once the cluster is whole. A promotion starts a new timeline,
//! so after a failover the feed's epoch is another one and the old cursor
//! (its `max_rev` with its `epoch`) must get 409 `resnapshot`, never a
//! page; after a fault that promotes nothing the same cursor still reads.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;

/// A feed cursor as a till keeps it.
pub struct Cursor {
    pub max_rev: i64,
    pub epoch: String,
}

/// `GET` through the failover's 503s (and cut connections), for up to 60 s.
async fn get(http: &reqwest::Client, url: &str, token: &str) -> Result<(u16, Value)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = http.get(url).bearer_auth(token).send().await;
        if let Ok(res) = answer {
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap_or(Value::Null);
            if status != 503 {
                return Ok((status, body));
            }
        }
        if Instant::now() > deadline {
            bail!("GET {url}: no answer but 503 within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The cursor a till holds after reading the feed's first page (its
/// `max_rev` lies well inside the head, so only its epoch can refuse it
/// later).
pub async fn take(http: &reqwest::Client, base: &str, token: &str) -> Result<Cursor> {
    let (status, page) = get(http, &format!("{base}/sync/changes?since=0&limit=1"), token).await?;
    let (Some(max_rev), Some(epoch)) = (page["max_rev"].as_i64(), page["epoch"].as_str()) else {
        bail!("GET /sync/changes answered {status} without max_rev and epoch: {page}");
    };
    Ok(Cursor {
        max_rev,
        epoch: epoch.to_owned(),
    })
}

/// Sends `cursor` again: after a promotion it must be 409 `resnapshot`,
/// else a page of the same epoch. Answers what it got (for the report) or
/// why that is wrong.
pub async fn check(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    cursor: &Cursor,
    promoted: bool,
) -> Result<std::result::Result<String, String>> {
    let url = format!(
        "{base}/sync/changes?since={}&epoch={}&limit=1",
        cursor.max_rev, cursor.epoch
    );
    let (status, body) = get(http, &url, token).await?;
    let now = take(http, base, token).await?.epoch;
    let seen = format!(
        "{status} {}",
        body["code"]
            .as_str()
            .unwrap_or(if status == 200 { "page" } else { "" })
    );
    let epochs = format!("epoch {} -> {now}", cursor.epoch);
    Ok(match (promoted, status) {
        (true, 409) if body["code"] == "resnapshot" && now != cursor.epoch => {
            Ok(format!("{seen} ({epochs})"))
        }
        (false, 200) if body["epoch"] == cursor.epoch.as_str() && now == cursor.epoch => {
            Ok(format!("{seen} ({epochs})"))
        }
        _ => Err(format!(
            "the cursor taken before the fault got {status} {body} ({epochs}); expected {}",
            if promoted {
                "409 resnapshot and a new epoch"
            } else {
                "a page of the same epoch"
            }
        )),
    })
}
