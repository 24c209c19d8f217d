//! Reading the bounds a served OpenAPI document declares on request
//! bodies: string lengths, list sizes, and closed value lists (string enums,
//! and patterns built from a list of words by `domain::input::{any_case,
//! any_case_or_blank, exactly, trimmed}`).

use serde_json::Value;

/// One bound on one field of a request body.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The field as a 400 names it: `name`, or `items[0].notes` for a
    /// property of a list's elements.
    pub field: String,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    MaxLength(usize),
    MinLength(usize),
    MaxItems(usize),
    MinItems(usize),
    /// Exactly these values; `any_case` when the pattern takes any case.
    Words {
        words: Vec<String>,
        any_case: bool,
    },
}

impl Kind {
    pub fn describe(&self) -> String {
        match self {
            Kind::MaxLength(n) => format!("maxLength {n}"),
            Kind::MinLength(n) => format!("minLength {n}"),
            Kind::MaxItems(n) => format!("maxItems {n}"),
            Kind::MinItems(n) => format!("minItems {n}"),
            Kind::Words { words, any_case } => {
                let case = if *any_case { "any case" } else { "exact" };
                format!("one of {} ({case})", words.join("|"))
            }
        }
    }
}

/// The `$ref`-free schema: `#/components/schemas/X` resolved in `doc`, and
/// a nullable `oneOf`/`anyOf` of one reference read as that reference.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/components/schemas/");
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    for union in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema.get(union).and_then(Value::as_array) {
            let refs: Vec<&Value> = alternatives
                .iter()
                .filter(|a| a.get("$ref").is_some())
                .collect();
            if let [one] = refs.as_slice() {
                return resolve(doc, one);
            }
        }
    }
    schema
}

fn has_type(schema: &Value, wanted: &str) -> bool {
    match &schema["type"] {
        Value::String(t) => t == wanted,
        Value::Array(ts) => ts.iter().any(|t| t == wanted),
        _ => false,
    }
}

fn count(schema: &Value, key: &str) -> Option<usize> {
    schema
        .get(key)
        .and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// The bounds of a request body's schema, its list elements' included.
pub fn bounds(doc: &Value, body_schema: &Value) -> Vec<Bound> {
    let mut out = Vec::new();
    walk(doc, resolve(doc, body_schema), "", &mut out);
    out
}

fn walk(doc: &Value, schema: &Value, prefix: &str, out: &mut Vec<Bound>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, raw) in properties {
        let field = format!("{prefix}{name}");
        let property = resolve(doc, raw);
        let mut add = |kind| {
            out.push(Bound {
                field: field.clone(),
                kind,
            })
        };
        if has_type(property, "string") {
            if let Some(n) = count(property, "maxLength") {
                add(Kind::MaxLength(n));
            }
            if let Some(n) = count(property, "minLength") {
                add(Kind::MinLength(n));
            }
            if let Some(words) = property.get("enum").and_then(Value::as_array) {
                let words = words
                    .iter()
                    .filter_map(|w| w.as_str().map(str::to_owned))
                    .collect();
                add(Kind::Words {
                    words,
                    any_case: false,
                });
            }
            if let Some(pattern) = property.get("pattern").and_then(Value::as_str) {
                if let Some(kind) = word_list(pattern) {
                    add(kind);
                }
            }
        }
        if has_type(property, "array") {
            if let Some(n) = count(property, "maxItems") {
                add(Kind::MaxItems(n));
            }
            if let Some(n) = count(property, "minItems") {
                add(Kind::MinItems(n));
            }
            walk(
                doc,
                resolve(doc, &property["items"]),
                &format!("{field}[0]."),
                out,
            );
        }
    }
}

/// The words of a pattern made from a word list (`^(a|b)$`, with optional
/// blanks around and the group optional for "blank or one of"), and
/// whether it takes them in any case (each letter written `[Aa]`). `None`
/// for any other pattern (`\S`, a character class of its own).
pub fn word_list(pattern: &str) -> Option<Kind> {
    let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let inner = inner.strip_prefix("\\s*").unwrap_or(inner);
    let inner = inner.strip_suffix("\\s*").unwrap_or(inner);
    let inner = inner.strip_suffix('?').unwrap_or(inner);
    let inner = inner.strip_prefix('(')?.strip_suffix(')')?;
    let mut any_case = false;
    let mut words = Vec::new();
    for alternative in inner.split('|') {
        let mut word = String::new();
        let mut chars = alternative.chars();
        while let Some(c) = chars.next() {
            match c {
                '[' => {
                    let class: String = chars.by_ref().take_while(|&c| c != ']').collect();
                    let mut letters = class.chars();
                    let (upper, lower) = (letters.next()?, letters.next()?);
                    if letters.next().is_some() || upper.to_ascii_lowercase() != lower {
                        return None;
                    }
                    any_case = true;
                    word.push(lower);
                }
                c if c.is_ascii_alphanumeric() || c == '_' => word.push(c),
                _ => return None,
            }
        }
        if word.is_empty() {
            return None;
        }
        words.push(word);
    }
    Some(Kind::Words { words, any_case })
}

/// Every POST and PUT operation with a JSON body: (method, path, bounds).
pub fn writes(doc: &Value) -> Vec<(String, String, Vec<Bound>)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in ["post", "put"] {
            let schema = &item[method]["requestBody"]["content"]["application/json"]["schema"];
            if schema.is_null() {
                continue;
            }
            let path = path.trim_start_matches("/api/v1").to_owned();
            out.push((method.to_uppercase(), path, bounds(doc, schema)));
        }
    }
    out
}

#[test]
fn word_lists_are_read_back_from_the_patterns_the_domain_builds() {
    use domain::input::{any_case, any_case_or_blank, exactly, trimmed};
    let words = ["cash", "mobile_money"];
    for (pattern, case) in [
        (any_case(&words), true),
        (any_case_or_blank(&words), true),
        (exactly(&words), false),
        (trimmed(&words), false),
    ] {
        match word_list(&pattern) {
            Some(Kind::Words { words: w, any_case }) => {
                assert_eq!(w, words, "{pattern}");
                assert_eq!(any_case, case, "{pattern}");
            }
            other => panic!("{pattern}: {other:?}"),
        }
    }
    assert!(word_list("\\S").is_none());
    assert!(word_list("^[A-Z0-9]+$").is_none());
}
