//! Every bound the served OpenAPI document declares on a write's body holds
//! at the handler, at exactly the documented value: for each string
//! `maxLength`/`minLength`, array `maxItems`/`minItems` and closed value
//! list (a string enum, or a pattern built from a word list), a request at
//! the limit is accepted (2xx) and one past it is refused with a 400 naming
//! the field, leaving nothing made or changed.
//!
//! The bounds are read from the document, not listed here: a new
//! documented bound is tested as soon as it is declared, a bound the
//! handler does not enforce (or enforces at another value) fails, and a
//! write whose body documents a bound but that `routes::ROUTES` cannot
//! drive fails the coverage test until it gets a driver (or an entry, with
//! its reason, in `routes::EXCEPTIONS`).

mod document;
mod routes;
mod world;

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::Value;

use crate::common::TestApp;
use document::{writes, Bound, Kind};
use routes::{method, Change, Route, EXCEPTIONS, ROUTES};
use world::World;

async fn served_document(app: &TestApp) -> Value {
    let res = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// What a probe sets the field to.
#[derive(Debug, Clone)]
enum Set {
    /// A text of this many characters.
    Len(usize),
    /// This very text.
    Word(String),
    /// A list of this many elements.
    Items(usize),
}

/// One request against one bound: the field's value, and whether it is
/// past the bound (to be refused) or within it (to be accepted).
struct Probe {
    value: Set,
    past: bool,
}

impl Probe {
    fn at(value: Set) -> Probe {
        Probe { value, past: false }
    }

    fn past(value: Set) -> Probe {
        Probe { value, past: true }
    }
}

/// The requests that pin `bound` to its documented value.
fn probes(bound: &Bound) -> Vec<Probe> {
    let mut out = Vec::new();
    match &bound.kind {
        Kind::MaxLength(n) => {
            out.push(Probe::at(Set::Len(*n)));
            out.push(Probe::past(Set::Len(n + 1)));
        }
        Kind::MinLength(n) => {
            out.push(Probe::at(Set::Len(*n)));
            if *n > 0 {
                out.push(Probe::past(Set::Len(n - 1)));
            }
        }
        Kind::MaxItems(n) => {
            out.push(Probe::at(Set::Items(*n)));
            out.push(Probe::past(Set::Items(n + 1)));
        }
        Kind::MinItems(n) => {
            out.push(Probe::at(Set::Items(*n)));
            if *n > 0 {
                out.push(Probe::past(Set::Items(n - 1)));
            }
        }
        Kind::Words { words, any_case } => {
            out.extend(words.iter().map(|w| Probe::at(Set::Word(w.clone()))));
            out.push(Probe::past(Set::Word("zz_unlisted".to_owned())));
            // The case the document promises: any, or exactly as listed.
            let upper = words[0].to_uppercase();
            if *any_case {
                out.push(Probe::at(Set::Word(upper)));
            } else if upper != words[0] {
                out.push(Probe::past(Set::Word(upper)));
            }
        }
    }
    out
}

/// The value at `field` (`items[0].notes`) of `body`, made if missing.
fn slot<'a>(body: &'a mut Value, field: &str) -> &'a mut Value {
    let mut v = body;
    for part in field.split('.') {
        match part.split_once('[') {
            Some((name, index)) => {
                let i: usize = index.trim_end_matches(']').parse().unwrap();
                v = &mut v[name][i];
            }
            None => v = &mut v[part],
        }
    }
    v
}

/// Sets `field` of `body` as `change` says; a list is cut, or filled with
/// copies of its first element, to the length wanted (unless the route
/// built it already).
fn apply(body: &mut Value, field: &str, change: &Change) {
    match change {
        Change::Text(s) => *slot(body, field) = Value::String(s.clone()),
        Change::Items(n) => {
            let list = slot(body, field);
            let items = list.as_array().cloned().unwrap_or_default();
            if items.len() != *n {
                let first = items.first().cloned().unwrap_or(Value::Null);
                *list = Value::Array(vec![first; *n]);
            }
        }
    }
}

/// Sends one probe; a failure's description, or `None` when it held.
async fn run(
    w: &World,
    verb: &str,
    path: &str,
    route: Route,
    bound: &Bound,
    probe: Probe,
) -> Option<String> {
    let field = bound.field.as_str();
    let change = match &probe.value {
        Set::Len(n) => Change::Text(w.text(field, *n, probe.past)),
        Set::Word(s) => Change::Text(s.clone()),
        Set::Items(n) => Change::Items(*n),
    };
    let shown = match &change {
        Change::Text(s) if s.chars().count() > 24 => format!("{} characters", s.chars().count()),
        Change::Text(s) => format!("{s:?}"),
        Change::Items(n) => format!("{n} items"),
    };
    let at = format!(
        "{verb} {path} `{field}` ({}) = {shown}",
        bound.kind.describe()
    );
    let mut prepared = route.prepare(w, field, &change, probe.past).await;
    apply(&mut prepared.body, field, &change);
    let before = w.scalar(&prepared.witness).await;
    let (status, answer) = w
        .send(method(verb), &prepared.path, &prepared.token, prepared.body)
        .await;
    if !probe.past {
        return (!status.is_success())
            .then(|| format!("{at}: within the bound, answered {status}: {answer}"));
    }
    if status != StatusCode::BAD_REQUEST || answer["field"] != field {
        return Some(format!(
            "{at}: past the bound, answered {status} (want 400 naming `{field}`): {answer}"
        ));
    }
    let after = w.scalar(&prepared.witness).await;
    (before != after).then(|| format!("{at}: refused, but it changed what it must not"))
}

fn driver(verb: &str, path: &str) -> Option<Route> {
    ROUTES
        .iter()
        .find(|(m, p, _)| *m == verb && *p == path)
        .map(|(_, _, r)| *r)
}

#[tokio::test]
async fn every_documented_bound_holds_at_the_limit_and_past_it() {
    let w = World::open().await;
    let doc = served_document(&w.app).await;
    let mut failures = Vec::new();
    let mut probes_sent = 0;
    for (verb, path, bounds) in writes(&doc) {
        let Some(route) = driver(&verb, &path) else {
            // Without a driver: the coverage test names it.
            continue;
        };
        for bound in &bounds {
            for probe in probes(bound) {
                probes_sent += 1;
                if let Some(failure) = run(&w, &verb, &path, route, bound, probe).await {
                    failures.push(failure);
                }
            }
        }
    }
    eprintln!("declared limits: {probes_sent} requests against the documented bounds");
    assert!(
        probes_sent > 300,
        "only {probes_sent} probes: is the document read?"
    );
    assert!(
        failures.is_empty(),
        "{} documented bounds do not hold at the handler:\n{}",
        failures.len(),
        failures.join("\n")
    );
    w.app.assert_invariants().await;
}

/// Every write whose body documents a bound is driven by the test above
/// (or listed, with its reason, as an exception), and every driver names
/// a write that still documents one.
#[tokio::test]
async fn every_write_with_a_documented_bound_has_a_driver() {
    let app = TestApp::spawn().await;
    let doc = served_document(&app).await;
    let bounded: BTreeSet<(String, String)> = writes(&doc)
        .into_iter()
        .filter(|(_, _, bounds)| !bounds.is_empty())
        .map(|(verb, path, _)| (verb, path))
        .collect();
    let excepted: BTreeSet<(String, String)> = EXCEPTIONS
        .iter()
        .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let driven: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let undriven: Vec<_> = bounded
        .iter()
        .filter(|w| !driven.contains(*w) && !excepted.contains(*w))
        .collect();
    assert!(
        undriven.is_empty(),
        "writes documenting a bound without a driver in declared_limits::routes: {undriven:?}"
    );
    let stale: Vec<_> = driven
        .iter()
        .chain(&excepted)
        .filter(|w| !bounded.contains(*w))
        .collect();
    assert!(
        stale.is_empty(),
        "drivers or exceptions of writes that document no bound (or no longer exist): {stale:?}"
    );
    let both: Vec<_> = driven.intersection(&excepted).collect();
    assert!(both.is_empty(), "both driven and excepted: {both:?}");
}
