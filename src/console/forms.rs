//! Form fields built in Rust and drawn by one template
//! (`templates/console/_field.html`): every field gets a label, its value
//! as sent, and the refusal's words beside it when the last post was
//! refused for that field, so the daily-work pages do not repeat markup.

use std::collections::HashMap;
use std::str::FromStr;

use chrono::NaiveDate;
use domain::paging::Page;
use domain::Error;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::Notice;

/// A choice of a select.
#[derive(Debug, Clone)]
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

impl Choice {
    pub fn new(value: impl Into<String>, label: impl Into<String>, current: &str) -> Choice {
        let value = value.into();
        Choice {
            selected: value == current,
            label: label.into(),
            value,
        }
    }
}

/// One labelled field of a form.
#[derive(Debug, Clone)]
pub struct Field {
    /// The form name (what the handler reads).
    pub name: String,
    /// The element id (unique on the page; `prefix-name` when prefixed).
    pub id: String,
    pub label: String,
    pub value: String,
    /// `text`, `number`, `date`, `email`, `checkbox`, `select`, `textarea`.
    pub kind: &'static str,
    pub choices: Vec<Choice>,
    pub required: bool,
    /// A short note under the label (units, what blank means).
    pub hint: String,
    /// Extra attributes' values: `step` for numbers.
    pub step: &'static str,
    pub error: Option<String>,
}

impl Field {
    fn of(name: &str, label: &str, value: &str, kind: &'static str) -> Field {
        Field {
            name: name.to_owned(),
            id: name.to_owned(),
            label: label.to_owned(),
            value: value.to_owned(),
            kind,
            choices: Vec::new(),
            required: false,
            hint: String::new(),
            step: "any",
            error: None,
        }
    }

    pub fn text(name: &str, label: &str, value: &str) -> Field {
        Field::of(name, label, value, "text")
    }

    pub fn number(name: &str, label: &str, value: &str) -> Field {
        Field::of(name, label, value, "number")
    }

    /// A whole number field.
    pub fn whole(name: &str, label: &str, value: &str) -> Field {
        let mut f = Field::of(name, label, value, "number");
        f.step = "1";
        f
    }

    pub fn date(name: &str, label: &str, value: &str) -> Field {
        Field::of(name, label, value, "date")
    }

    pub fn area(name: &str, label: &str, value: &str) -> Field {
        Field::of(name, label, value, "textarea")
    }

    pub fn check(name: &str, label: &str, on: bool) -> Field {
        Field::of(name, label, if on { "on" } else { "" }, "checkbox")
    }

    pub fn select(name: &str, label: &str, choices: Vec<Choice>) -> Field {
        let mut f = Field::of(name, label, "", "select");
        f.choices = choices;
        f
    }

    pub fn required(mut self) -> Field {
        self.required = true;
        self
    }

    pub fn hint(mut self, hint: &str) -> Field {
        self.hint = hint.to_owned();
        self
    }

    /// Prefixes the element id (two forms on one page with one field name).
    pub fn prefixed(mut self, prefix: &str) -> Field {
        self.id = format!("{prefix}-{}", self.name);
        self
    }

    pub fn checked(&self) -> bool {
        self.kind == "checkbox" && !self.value.is_empty()
    }

    /// What `aria-describedby` names: the hint and the error when shown.
    pub fn described_by(&self) -> String {
        let mut ids = Vec::new();
        if !self.hint.is_empty() {
            ids.push(format!("{}-hint", self.id));
        }
        if self.error.is_some() {
            ids.push(format!("{}-error", self.id));
        }
        ids.join(" ")
    }
}

/// Places the notice's error beside the field it names; true when one
/// of `fields` took it (otherwise the page shows it above the form).
pub fn place(fields: &mut [Field], notice: &Notice) -> bool {
    let mut placed = false;
    for f in fields.iter_mut() {
        if let Some(e) = notice.for_field(&f.name) {
            f.error = Some(e.to_owned());
            placed = true;
        }
    }
    placed
}

/// A form's fields with the notice's error placed, and the error's words
/// when no field of it took them.
#[derive(Debug, Clone, Default)]
pub struct Form {
    pub fields: Vec<Field>,
    pub error: Option<String>,
}

impl Form {
    pub fn new(mut fields: Vec<Field>, notice: &Notice) -> Form {
        let placed = place(&mut fields, notice);
        Form {
            error: if placed { None } else { notice.error.clone() },
            fields,
        }
    }

    /// The fields alone (no error to place).
    pub fn plain(fields: Vec<Field>) -> Form {
        Form {
            fields,
            error: None,
        }
    }
}

/// What a form sent, by name: plain fields and per-row fields named
/// `<field>-<row id>`, kept so a refused form is shown again as it was.
#[derive(Debug, Default, Clone)]
pub struct Sent(HashMap<String, String>);

impl Sent {
    /// The pairs of a posted form (a name sent twice keeps its last value).
    pub fn of(pairs: Vec<(String, String)>) -> Sent {
        Sent(pairs.into_iter().collect())
    }

    /// What was sent for `name` (blank when nothing).
    pub fn get(&self, name: &str) -> String {
        self.0.get(name).cloned().unwrap_or_default()
    }

    /// What was sent for `field` of row `id`.
    pub fn row(&self, field: &str, id: &str) -> String {
        self.get(&format!("{field}-{id}"))
    }

    /// Replaces what was sent for `name` (a form filled in by the server,
    /// such as a scan).
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.0.insert(name.to_owned(), value.into());
    }

    /// Whether a checkbox `name` was ticked.
    pub fn ticked(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|v| !v.is_empty())
    }
}

/// The row id of a per-row field name: `qty-<uuid>` is row `<uuid>` of
/// field `qty`.
pub fn row_id(name: &str, field: &str) -> Option<Uuid> {
    let id = name.strip_prefix(field)?.strip_prefix('-')?;
    Uuid::parse_str(id).ok()
}

/// The index of an API field naming one item of a list: `lines[3].quantity`
/// is item 3 of `lines` (to put a refusal beside the row it came from).
pub fn indexed(field: &str, list: &str) -> Option<usize> {
    let rest = field.strip_prefix(list)?.strip_prefix('[')?;
    rest.split(']').next()?.parse().ok()
}

/// A checkbox's form value as a flag.
pub fn ticked(v: &Option<String>) -> bool {
    v.as_deref().is_some_and(|s| !s.is_empty())
}

/// A decimal field: blank is none; anything else must be a number (400
/// naming the field).
pub fn decimal(field: &str, text: &str) -> Result<Option<Decimal>, Error> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    Decimal::from_str(t).map(Some).map_err(|_| {
        Error::validation(
            field,
            format!("{field} must be a number such as 1500 or 12.50."),
        )
    })
}

/// A decimal field that must be filled.
pub fn required_decimal(field: &str, text: &str) -> Result<Decimal, Error> {
    decimal(field, text)?.ok_or_else(|| Error::validation(field, format!("Enter {field}.")))
}

/// A whole-number field: blank is none.
pub fn whole(field: &str, text: &str) -> Result<Option<i64>, Error> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    t.parse()
        .map(Some)
        .map_err(|_| Error::validation(field, format!("{field} must be a whole number.")))
}

/// A date field (`YYYY-MM-DD`): blank is none.
pub fn date(field: &str, text: &str) -> Result<Option<NaiveDate>, Error> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(t, "%Y-%m-%d")
        .map(Some)
        .map_err(|_| Error::validation(field, format!("{field} must be a date (YYYY-MM-DD).")))
}

/// The links between the pages of a paged list.
#[derive(Debug, Clone, Default)]
pub struct Pager {
    pub page: i64,
    pub pages: i64,
    pub total: i64,
    pub prev: Option<String>,
    pub next: Option<String>,
}

impl Pager {
    /// `base` is the list's address with its filters and a trailing `?` or `&`.
    pub fn new(base: &str, page: Page, total: i64) -> Pager {
        let pages = ((total + page.page_size - 1) / page.page_size).max(1);
        Pager {
            page: page.page,
            pages,
            total,
            prev: (page.page > 1).then(|| format!("{base}page={}", page.page - 1)),
            next: (page.page < pages).then(|| format!("{base}page={}", page.page + 1)),
        }
    }
}

/// A query string of the filters that are set (for pager links), ending
/// with `?` or `&` so a page number can follow.
pub fn base_of(path: &str, pairs: &[(&str, &str)]) -> String {
    let set: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .copied()
        .collect();
    if set.is_empty() {
        return format!("{path}?");
    }
    let q = serde_urlencoded::to_string(&set).unwrap_or_default();
    format!("{path}?{q}&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_and_list_indexes_are_read_from_names() {
        let id = Uuid::nil();
        assert_eq!(row_id(&format!("qty-{id}"), "qty"), Some(id));
        assert_eq!(row_id(&format!("qtyx-{id}"), "qty"), None);
        assert_eq!(row_id("qty-7", "qty"), None);
        assert_eq!(indexed("lines[3].quantity", "lines"), Some(3));
        assert_eq!(indexed("charges[0].amount", "charges"), Some(0));
        assert_eq!(indexed("charges[0].amount", "lines"), None);
        assert_eq!(indexed("lines", "lines"), None);
    }

    #[test]
    fn sent_reads_plain_and_row_fields() {
        let s = Sent::of(vec![
            ("reason".into(), "broken".into()),
            ("qty-7".into(), "3".into()),
            ("on".into(), "on".into()),
            ("qty-7".into(), "4".into()),
        ]);
        assert_eq!(s.get("reason"), "broken");
        assert_eq!(s.row("qty", "7"), "4");
        assert_eq!(s.get("missing"), "");
        assert!(s.ticked("on"));
        assert!(!s.ticked("reason-x"));
    }

    #[test]
    fn an_error_goes_beside_its_field_or_above_the_form() {
        let n = Notice::from_error(&Error::validation("price", "`price` is wrong."));
        let f = Form::new(vec![Field::text("price", "Price", "x")], &n);
        assert_eq!(f.fields[0].error.as_deref(), Some("price is wrong."));
        assert_eq!(f.error, None);
        assert_eq!(f.fields[0].described_by(), "price-error");
        let f = Form::new(vec![Field::text("name", "Name", "")], &n);
        assert_eq!(f.error.as_deref(), Some("price is wrong."));
    }
}
