//! Checks on request values shared by every write path (REST and sync push):
//! money amounts, whole quantities and trimmed text.

use rust_decimal::Decimal;

use crate::error::{Error, Result};

/// Largest amount accepted anywhere (fits `numeric(14, 2)`).
pub const MAX_AMOUNT: i64 = 1_000_000_000_000;
/// Largest quantity accepted on one line.
pub const MAX_QUANTITY: i64 = 1_000_000;

/// A money amount: at most 2 decimals, within `numeric(14, 2)`, and not negative.
pub fn amount(field: &str, value: Decimal) -> Result<Decimal> {
    if value.is_sign_negative() && !value.is_zero() {
        return Err(Error::validation(
            field,
            format!("`{field}` must not be negative."),
        ));
    }
    // A number too small for a decimal (`-8e-153`) arrives as a zero with
    // 28 decimals, its sign lost: it was never a 2-decimal amount.
    let underflow = value.is_zero() && value.scale() > 2;
    if underflow || value.normalize().scale() > 2 || value >= Decimal::from(MAX_AMOUNT) {
        return Err(Error::validation(
            field,
            format!("`{field}` must be an amount with at most 2 decimals."),
        ));
    }
    Ok(value.normalize())
}

/// A money amount that must be above zero.
pub fn positive_amount(field: &str, value: Decimal) -> Result<Decimal> {
    let v = amount(field, value)?;
    if v.is_zero() {
        return Err(Error::validation(
            field,
            format!("`{field}` must be greater than zero."),
        ));
    }
    Ok(v)
}

/// A quantity as a JSON number, never a string: `"quantity": "1"` is a
/// client's mistake (400), not a quantity of one. Whether it is whole and
/// in range is [`quantity`]'s to say.
pub fn json_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Decimal, D::Error> {
    use serde::Deserialize;
    let n = serde_json::Number::deserialize(d)?;
    let exact = n
        .as_i64()
        .map(Decimal::from)
        .or_else(|| n.as_u64().map(Decimal::from));
    match exact {
        Some(v) => Ok(v),
        None => n
            .as_f64()
            .and_then(|f| Decimal::try_from(f).ok())
            .ok_or_else(|| serde::de::Error::custom("expected a quantity (a JSON number)")),
    }
}

/// A whole, positive quantity.
pub fn quantity(field: &str, value: Decimal) -> Result<i32> {
    whole(field, value, 1)
}

/// A whole quantity of at least `min`.
pub fn whole(field: &str, value: Decimal, min: i64) -> Result<i32> {
    let v = value.normalize();
    if v.scale() != 0 {
        return Err(Error::validation(
            field,
            format!("`{field}` must be a whole number."),
        ));
    }
    let n = i64::try_from(v.mantissa()).unwrap_or(i64::MAX);
    if n < min {
        let what = if min == 1 {
            "greater than zero"
        } else {
            "zero or more"
        };
        return Err(Error::validation(
            field,
            format!("`{field}` must be {what}."),
        ));
    }
    if n > MAX_QUANTITY {
        return Err(Error::validation(
            field,
            format!("`{field}` must be at most {MAX_QUANTITY}."),
        ));
    }
    i32::try_from(n).map_err(|_| Error::validation(field, format!("`{field}` is too large.")))
}

/// Longest text, in characters, each kind of field takes. Every write path
/// checks these (400 naming the field) and the database holds the same
/// bounds as `CHECK (char_length(col) <= N)` constraints (migration 0014), so
/// no single value can grow a row, a change-feed entry or a conflict past a
/// few kilobytes.
pub mod max {
    /// Names of people, organisations, medicines, templates, devices.
    pub const NAME: usize = 200;
    /// Notes, reasons, descriptions, instructions, receipt texts.
    pub const NOTES: usize = 2000;
    /// Codes, phone numbers, national ids, tax and licence numbers.
    pub const CODE: usize = 50;
    /// Short labels: city, form, strength, unit, batch and invoice numbers,
    /// references, kinds.
    pub const LABEL: usize = 100;
    /// Postal addresses.
    pub const ADDRESS: usize = 500;
    /// Email addresses (RFC 5321's limit).
    pub const EMAIL: usize = 254;
    /// Links and storage keys.
    pub const URL: usize = 1000;
    /// Coupon codes.
    pub const COUPON_CODE: usize = 64;
    /// A client's id for one write (`client_mutation_id`), by which a
    /// retry is told from a new request.
    pub const MUTATION_ID: usize = 200;
}

/// Characters that change how text shows without showing themselves:
/// zero-width spaces and joiners, the left-to-right and right-to-left
/// marks, bidirectional embeddings, overrides and isolates, invisible
/// operators and the byte-order mark. A name made of them looks blank, and
/// one containing them can print in another order than it is stored.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// Characters that are drawn as nothing although they are not spaces
/// (Hangul fillers, the blank Braille pattern): they do not make a value
/// non-blank.
fn blank_looking(c: char) -> bool {
    matches!(
        c,
        '\u{115F}' | '\u{1160}' | '\u{2800}' | '\u{3164}' | '\u{FFA0}'
    )
}

/// Whether `c` shows as something on a screen or a receipt.
pub fn visible(c: char) -> bool {
    !(c.is_whitespace() || c.is_control() || invisible(c) || blank_looking(c))
}

/// Refuses what a field of its kind may not hold: any control character
/// (Unicode category Cc: ESC, backspace, NUL, newlines...), except tab and
/// newline in a multi-line field, and every invisible formatting character.
/// A till that prints a name raw could otherwise be sent printer commands.
fn refuse_hidden(field: &str, v: &str, multiline: bool) -> Result<()> {
    let allowed = |c: char| multiline && (c == '\n' || c == '\t');
    let bad = v
        .chars()
        .find(|&c| (c.is_control() && !allowed(c)) || invisible(c));
    match bad {
        None => Ok(()),
        Some(c) => Err(Error::validation(
            field,
            format!(
                "`{field}` must not contain control or invisible characters (found U+{:04X}){}.",
                c as u32,
                if multiline {
                    "; only tabs and line breaks are allowed"
                } else {
                    ""
                }
            ),
        )),
    }
}

/// Trimmed single-line text that shows at least one character, at most
/// `max` characters.
pub fn required_text(field: &str, value: &str, max: usize) -> Result<String> {
    let v = text(field, value, max)?;
    if !v.chars().any(visible) {
        return Err(Error::validation(
            field,
            format!("`{field}` must not be empty."),
        ));
    }
    Ok(v)
}

/// Trimmed optional single-line text, at most `max` characters: names,
/// phones, codes, numbers, reasons, witnesses, batch numbers and the like.
pub fn text(field: &str, value: &str, max: usize) -> Result<String> {
    let v = value.trim();
    refuse_hidden(field, v, false)?;
    within(field, v, max)
}

/// Trimmed optional multi-line text (notes, receipt headers and footers,
/// descriptions), at most `max` characters: tabs and line breaks are kept
/// (a browser's CR LF becomes LF), every other control character refused.
pub fn multiline(field: &str, value: &str, max: usize) -> Result<String> {
    let v = value.trim().replace("\r\n", "\n");
    refuse_hidden(field, &v, true)?;
    within(field, &v, max)
}

/// [`multiline`] text that shows at least one character.
pub fn required_multiline(field: &str, value: &str, max: usize) -> Result<String> {
    let v = multiline(field, value, max)?;
    if !v.chars().any(visible) {
        return Err(Error::validation(
            field,
            format!("`{field}` must not be empty."),
        ));
    }
    Ok(v)
}

fn within(field: &str, v: &str, max: usize) -> Result<String> {
    if v.chars().count() > max {
        return Err(Error::validation(
            field,
            format!("`{field}` must be at most {max} characters."),
        ));
    }
    Ok(v.to_owned())
}

/// A field that may be absent (`None`), null (`Some(None)`, clearing it) or
/// a value; use with `#[serde(default, deserialize_with = "input::nullable")]`.
pub fn nullable<'de, D, T>(d: D) -> std::result::Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Option::<T>::deserialize(d).map(Some)
}

/// A flag sent as a JSON boolean or as the snapshot's 0/1 integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> serde::Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Int(i64),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Bool(b)) => Ok(Flag(b)),
            Ok(Raw::Int(0)) => Ok(Flag(false)),
            Ok(Raw::Int(1)) => Ok(Flag(true)),
            _ => Err(serde::de::Error::custom("expected true, false, 0 or 1")),
        }
    }
}

/// Parses an id from a path. A malformed id names nothing that exists: 404
/// (`<what> not found`), as a well-formed id of no row would.
pub fn path_id(raw: &str, what: &str) -> Result<uuid::Uuid> {
    uuid::Uuid::parse_str(raw).map_err(|_| Error::not_found(format!("{what} not found")))
}

/// A pattern matching `words` in any case, surrounded by optional blanks:
/// the document's form of a value checked by [`one_of_or_blank`] or folded
/// to lower case by its handler.
pub fn any_case(words: &[&str]) -> String {
    let alternatives: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect();
    format!("^\\s*({})\\s*$", alternatives.join("|"))
}

/// A pattern matching exactly one of `words`, nothing around it.
pub fn exactly(words: &[&str]) -> String {
    format!("^({})$", words.join("|"))
}

/// A pattern matching exactly `words`, surrounded by optional blanks.
pub fn trimmed(words: &[&str]) -> String {
    format!("^\\s*({})\\s*$", words.join("|"))
}

/// An optional filter that is one of `words` in any case, or blank for
/// all: `None` when blank, else the word in lower case; 400 naming
/// `field` and listing the words otherwise.
pub fn one_of_or_blank(field: &str, raw: Option<&str>, words: &[&str]) -> Result<Option<String>> {
    let Some(s) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let s = s.to_lowercase();
    if !words.contains(&s.as_str()) {
        return Err(Error::validation(
            field,
            format!("`{field}` must be one of {}.", words.join(", ")),
        ));
    }
    Ok(Some(s))
}

/// A pattern matching `words` in any case, or blanks only: the
/// document's form of a value checked by [`one_of_or_blank`].
pub fn any_case_or_blank(words: &[&str]) -> String {
    // The words made optional: blank means none of them (all, or a default).
    any_case(words).replace(")\\s*$", ")?\\s*$")
}

/// The document's schema of a [`one_of_or_blank`] filter over `words`.
pub fn one_of_or_blank_schema(words: &[&str]) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(any_case_or_blank(words)))
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts() {
        assert!(amount("a", Decimal::new(-1, 0)).is_err());
        assert!(amount("a", Decimal::new(1001, 3)).is_err());
        assert_eq!(
            amount("a", Decimal::new(1500, 1)).ok(),
            Some(Decimal::new(150, 0))
        );
        assert!(positive_amount("a", Decimal::ZERO).is_err());
        // A number too small for a decimal arrives as 0 with 28 decimals.
        let tiny: Decimal = serde_json::from_str("-8.182687114101141e-153").unwrap_or_default();
        assert!(tiny.is_zero());
        assert!(amount("a", tiny).is_err(), "{tiny:?}");
        assert!(amount("a", Decimal::ZERO).is_ok());
    }

    #[test]
    fn text_lengths() {
        let long = "x".repeat(max::CODE + 1);
        let err = text("phone", &long, max::CODE).err();
        match err {
            Some(Error::Validation { field, detail, .. }) => {
                assert_eq!(field.as_deref(), Some("phone"));
                assert!(detail.contains("50"), "{detail}");
            }
            other => panic!("expected a validation error, got {other:?}"),
        }
        // Characters, not bytes: 50 two-byte letters fit a 50-character limit.
        assert_eq!(
            text("phone", &"é".repeat(max::CODE), max::CODE).ok(),
            Some("é".repeat(max::CODE))
        );
        // Trimmed before counting.
        assert!(text(
            "phone",
            &format!("  {}  ", "1".repeat(max::CODE)),
            max::CODE
        )
        .is_ok());
        assert!(required_text("name", "   ", max::NAME).is_err());
        assert!(required_text("name", &"n".repeat(max::NAME + 1), max::NAME).is_err());
        assert!(text("notes", "a\0b", max::NOTES).is_err());
    }

    #[test]
    fn hidden_characters() {
        for bad in [
            "Jane\u{1b}p",
            "a\nb",
            "a\u{8}b",
            "\u{202E}enaJ",
            "a\u{2066}b",
            "a\u{200B}b",
            "\u{FEFF}Jane",
            "a\tb",
        ] {
            assert!(text("name", bad, max::NAME).is_err(), "{bad:?}");
        }
        assert!(required_text("name", "\u{200B}", max::NAME).is_err());
        assert!(required_text("name", "\u{3164}", max::NAME).is_err());
        assert!(required_text("name", "Nakato Sarah", max::NAME).is_ok());
        assert!(required_text("name", "Ölçü 名前", max::NAME).is_ok());
        assert_eq!(
            multiline("notes", "line 1\r\n\tline 2", max::NOTES).ok(),
            Some("line 1\n\tline 2".to_owned())
        );
        for bad in ["a\rb", "a\u{1b}[2Jb", "a\u{202D}b", "a\u{7}"] {
            assert!(multiline("notes", bad, max::NOTES).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn quantities() {
        assert!(quantity("q", Decimal::new(15, 1)).is_err());
        assert!(quantity("q", Decimal::ZERO).is_err());
        assert_eq!(quantity("q", Decimal::new(20, 1)).ok(), Some(2));
        assert_eq!(whole("q", Decimal::ZERO, 0).ok(), Some(0));
    }
}
