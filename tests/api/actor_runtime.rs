//! The actor runtime itself: one message at a time per actor, panics become
//! 500s and the actor lives on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use domain::db::Pool;
use domain::{Command, Error, Registry, Result, RuntimeConfig};
use pharmacy::db;
use uuid::Uuid;

use crate::common::{fresh_database, test_config};

struct Timed {
    log: Arc<Mutex<Vec<(Instant, Instant)>>>,
}

impl Command for Timed {
    type Error = domain::Error;
    type Output = ();
    const NAME: &'static str = "timed";
    async fn run(self, pool: Pool) -> Result<()> {
        let start = Instant::now();
        // Awaits the database and a timer: a non-atomic handler would interleave here.
        let client = pool.get().await?;
        client.simple_query("SELECT pg_sleep(0.01)").await?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.log.lock().unwrap().push((start, Instant::now()));
        Ok(())
    }
}

struct Panics;

impl Command for Panics {
    type Error = domain::Error;
    type Output = ();
    const NAME: &'static str = "panics";
    async fn run(self, _pool: Pool) -> Result<()> {
        panic!("boom");
    }
}

struct Answers(i32);

impl Command for Answers {
    type Error = domain::Error;
    type Output = i32;
    const NAME: &'static str = "answers";
    async fn run(self, _pool: Pool) -> Result<i32> {
        Ok(self.0)
    }
}

async fn registry() -> Registry {
    let (_, url) = fresh_database().await;
    let pool = db::pool(&url, &test_config().database).unwrap();
    Registry::new(
        pool,
        RuntimeConfig {
            branch_mailbox: 64,
            device_mailbox: 64,
            arbiters: 2,
        },
    )
}

#[actix_web::test]
async fn one_actor_handles_one_message_to_completion_before_the_next() {
    let registry = registry().await;
    let key = Uuid::now_v7();
    let log = Arc::new(Mutex::new(Vec::new()));
    let calls = (0..12).map(|_| registry.branch(key, Timed { log: log.clone() }));
    for r in futures_util::future::join_all(calls).await {
        r.unwrap();
    }
    let mut spans = log.lock().unwrap().clone();
    assert_eq!(spans.len(), 12);
    spans.sort();
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "handling of two messages overlapped: {pair:?}"
        );
    }
}

#[actix_web::test]
async fn different_actors_run_in_parallel() {
    let registry = registry().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let calls = (0..8).map(|_| registry.device(Uuid::now_v7(), Timed { log: log.clone() }));
    for r in futures_util::future::join_all(calls).await {
        r.unwrap();
    }
    let spans = log.lock().unwrap().clone();
    let overlapping = spans
        .iter()
        .enumerate()
        .any(|(i, a)| spans.iter().skip(i + 1).any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(
        overlapping,
        "separate devices should not wait for each other"
    );
}

#[actix_web::test]
async fn a_panicking_command_is_a_500_and_the_actor_goes_on() {
    let registry = registry().await;
    let key = Uuid::now_v7();
    let err = registry.branch(key, Panics).await.unwrap_err();
    assert!(matches!(err, Error::Internal(_)), "{err:?}");
    assert_eq!(
        actix_web::ResponseError::status_code(&err),
        actix_web::http::StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(registry.branch(key, Answers(7)).await.unwrap(), 7);
}
