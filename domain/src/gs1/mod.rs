//! Reading what a barcode scanner sends: a GS1 element string (from a GS1
//! DataMatrix or GS1-128, with or without its symbology identifier, FNC1 as
//! the ASCII group separator or written with parentheses), a bare GTIN, or
//! anything else (an in-house barcode, matched as it is).
//!
//! A pure function over the text, in one left-to-right pass: linear in the
//! input and never panicking, whatever a scanner or a fuzzer sends. The
//! rules are the GS1 General Specifications': each Application Identifier's
//! data length and character set (`ai`), GS1 mod-10 check digits, `YYMMDD`
//! dates with day `00` meaning the month's last day and the century chosen
//! by the 50-year sliding window.

use std::fmt;

use chrono::{Datelike, NaiveDate};

pub mod ai;

use ai::{Ai, Data, Length};

/// The longest code read: a DataMatrix holds at most a few hundred
/// characters of element string.
pub const MAX_CODE_CHARS: usize = 512;

/// The ASCII group separator a scanner sends for FNC1.
const GS: char = '\u{1d}';

/// What a scanned code is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    /// A GS1 element string, its fields in the order sent.
    Gs1(ElementString),
    /// A bare GTIN (EAN-8, UPC-A, EAN-13 or GTIN-14), as GTIN-14.
    Gtin(Gtin),
    /// Not a GS1 code: an in-house barcode, matched exactly.
    Other(String),
}

/// A GTIN with a valid check digit, held as its 14 digits (a GTIN-13 and
/// the GTIN-14 made of it with a leading zero are the same product).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gtin(String);

impl Gtin {
    /// A GTIN-8, -12, -13 or -14; `None` unless it is all digits of one of
    /// those lengths with a valid check digit.
    pub fn parse(digits: &str) -> Option<Gtin> {
        let ok = matches!(digits.len(), 8 | 12 | 13 | 14)
            && digits.bytes().all(|b| b.is_ascii_digit())
            && check_digit_ok(digits);
        ok.then(|| Gtin(format!("{digits:0>14}")))
    }

    /// The 14 digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Gtin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One field of an element string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The Application Identifier's digits, e.g. `"17"` or `"3103"`.
    pub ai: String,
    pub value: String,
}

/// A GS1 element string, read and checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ElementString {
    pub elements: Vec<Element>,
    /// The year it was read in: its two-digit years are placed from it.
    pub read_in: i32,
}

impl ElementString {
    fn value(&self, ai: &str) -> Option<&str> {
        self.elements
            .iter()
            .find(|e| e.ai == ai)
            .map(|e| e.value.as_str())
    }

    /// The trade item (AI 01).
    pub fn gtin(&self) -> Option<Gtin> {
        self.value("01").and_then(Gtin::parse)
    }

    /// The batch or lot number (AI 10).
    pub fn batch(&self) -> Option<&str> {
        self.value("10")
    }

    /// The serial number (AI 21).
    pub fn serial(&self) -> Option<&str> {
        self.value("21")
    }

    /// The expiry date (AI 17), day `00` read as the month's last day.
    pub fn expiry(&self) -> Option<NaiveDate> {
        self.date("17")
    }

    /// The production date (AI 11).
    pub fn production(&self) -> Option<NaiveDate> {
        self.date("11")
    }

    /// A variable count (AI 30) or the count of trade items contained (37).
    pub fn count(&self) -> Option<u64> {
        self.value("30")
            .or_else(|| self.value("37"))
            .and_then(|v| v.parse().ok())
    }

    fn date(&self, ai: &str) -> Option<NaiveDate> {
        self.value(ai).and_then(|v| date(v, self.read_in).ok())
    }
}

/// Why a code could not be read: what is wrong, and at which character
/// (counted from 1 in the code as sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub what: String,
    pub at: usize,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at character {})", self.what, self.at)
    }
}

fn malformed<T>(what: impl Into<String>, at: usize) -> Result<T, Malformed> {
    Err(Malformed {
        what: what.into(),
        at,
    })
}

/// Reads a scanned code. `this_year` places two-digit years (the 50-year
/// window of the General Specifications, section 7.12).
pub fn read(code: &str, this_year: i32) -> Result<Scanned, Malformed> {
    if code.chars().count() > MAX_CODE_CHARS {
        return malformed(
            format!("the code is longer than {MAX_CODE_CHARS} characters"),
            MAX_CODE_CHARS + 1,
        );
    }
    // Scanners in keyboard mode end a code with CR or LF, some start it with a BOM.
    let trimmed = code.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let offset = code.len()
        - code
            .trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
            .len();
    let (gs1_symbology, body, skip) = match symbology(trimmed) {
        Some((gs1, rest)) => (gs1, rest, 3),
        None => (false, trimmed, 0),
    };
    let start = char_count(code, offset) + skip;
    if body.starts_with('(') {
        return bracketed(body, start, this_year).map(Scanned::Gs1);
    }
    if !gs1_symbology && !body.contains(GS) {
        if let Some(gtin) = Gtin::parse(body) {
            return Ok(Scanned::Gtin(gtin));
        }
        // Without a GS1 symbology identifier or separator, only a code
        // that opens with a GTIN (AI 01 and 14 digits) is an element string.
        let opens_with_gtin = body.len() > 16
            && body.starts_with("01")
            && body.as_bytes()[2..16].iter().all(u8::is_ascii_digit);
        if !opens_with_gtin {
            return Ok(Scanned::Other(body.to_owned()));
        }
    }
    element_string(body, start, this_year).map(Scanned::Gs1)
}

/// The AIM symbology identifier at the start, if any: whether it names a
/// GS1 symbology (`]d2` DataMatrix, `]C1` GS1-128, `]Q3` QR, `]e0`
/// DataBar, `]J1` DotCode), and the rest.
fn symbology(code: &str) -> Option<(bool, &str)> {
    let id = code.get(..3)?;
    let mut chars = id.chars();
    let ok = chars.next() == Some(']')
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    if !ok {
        return None;
    }
    let gs1 = matches!(id, "]d2" | "]C1" | "]Q3" | "]e0" | "]J1");
    Some((gs1, code.get(3..)?))
}

fn char_count(s: &str, bytes: usize) -> usize {
    s.get(..bytes).map_or(0, |p| p.chars().count())
}

/// An element string as a scanner sends it: fields one after another,
/// a variable-length field ended by FNC1 (GS) or the end.
fn element_string(body: &str, start: usize, this_year: i32) -> Result<ElementString, Malformed> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = ElementString {
        elements: Vec::new(),
        read_in: this_year,
    };
    let mut i = 0;
    // A leading FNC1 (some scanners send the symbol's first one) is no field.
    while chars.get(i) == Some(&GS) {
        i += 1;
    }
    while i < chars.len() {
        let at = start + i + 1;
        let head: String = chars[i..chars.len().min(i + 4)].iter().collect();
        let Some(ai) = ai::lookup(&head) else {
            return malformed(
                format!("`{head}` does not begin a known Application Identifier"),
                at,
            );
        };
        let id: String = chars[i..i + ai.digits()].iter().collect();
        i += ai.digits();
        let end = match ai.length {
            Length::Fixed(n) => {
                if i + n > chars.len() {
                    return malformed(
                        format!("AI ({id}) needs {n} characters of data"),
                        start + chars.len() + 1,
                    );
                }
                i + n
            }
            Length::UpTo(max) => {
                let stop = chars[i..]
                    .iter()
                    .position(|c| *c == GS)
                    .map_or(chars.len(), |p| i + p);
                if stop - i > max {
                    return malformed(
                        format!("AI ({id}) takes at most {max} characters"),
                        start + i + max + 1,
                    );
                }
                stop
            }
        };
        let value: String = chars[i..end].iter().collect();
        check(ai, &id, &value, start + i + 1, this_year)?;
        out.elements.push(Element { ai: id, value });
        i = end;
        // FNC1 after a field: it ends a variable-length one; after a fixed
        // length it is allowed (and due where the length is not
        // predefined, which is read leniently: the next field starts here).
        if chars.get(i) == Some(&GS) {
            i += 1;
        }
    }
    if out.elements.is_empty() {
        return malformed("the code holds no GS1 field", start + 1);
    }
    Ok(out)
}

/// The human-readable form: `(01)09501101530003(17)271231(10)AB-123`.
fn bracketed(body: &str, start: usize, this_year: i32) -> Result<ElementString, Malformed> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = ElementString {
        elements: Vec::new(),
        read_in: this_year,
    };
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '(' {
            return malformed(
                "expected `(` opening an Application Identifier",
                start + i + 1,
            );
        }
        let Some(close) = chars[i + 1..].iter().take(5).position(|c| *c == ')') else {
            return malformed(
                "an Application Identifier is 2 to 4 digits closed by `)`",
                start + i + 1,
            );
        };
        let id: String = chars[i + 1..i + 1 + close].iter().collect();
        let Some(ai) = ai::exact(&id).filter(|_| id.bytes().all(|b| b.is_ascii_digit())) else {
            return malformed(
                format!("`({id})` is not a known Application Identifier"),
                start + i + 1,
            );
        };
        let from = i + close + 2;
        let to = chars[from..]
            .iter()
            .position(|c| *c == '(')
            .map_or(chars.len(), |p| from + p);
        let value: String = chars[from..to].iter().collect();
        match ai.length {
            Length::Fixed(n) if value.chars().count() != n => {
                return malformed(
                    format!("AI ({id}) needs exactly {n} characters of data"),
                    start + from + 1,
                );
            }
            Length::UpTo(max) if value.chars().count() > max => {
                return malformed(
                    format!("AI ({id}) takes at most {max} characters"),
                    start + from + max + 1,
                );
            }
            _ => {}
        }
        check(ai, &id, &value, start + from + 1, this_year)?;
        out.elements.push(Element { ai: id, value });
        i = to;
    }
    if out.elements.is_empty() {
        return malformed("the code holds no GS1 field", start + 1);
    }
    Ok(out)
}

/// Checks a field's data against its identifier's rules.
fn check(ai: &Ai, id: &str, value: &str, at: usize, this_year: i32) -> Result<(), Malformed> {
    if value.is_empty() {
        return malformed(format!("AI ({id}) has no data"), at);
    }
    let digits = value.bytes().all(|b| b.is_ascii_digit());
    match ai.data {
        Data::Numeric | Data::Date | Data::CheckDigit if !digits => {
            malformed(format!("AI ({id}) takes digits only"), at)
        }
        Data::CheckDigit if !check_digit_ok(value) => malformed(
            format!("the check digit of AI ({id}) is wrong"),
            at + value.len() - 1,
        ),
        Data::Date => date(value, this_year)
            .map(|_| ())
            .map_err(|what| Malformed {
                what: format!("AI ({id}): {what}"),
                at,
            }),
        Data::Alphanumeric => match value.chars().position(|c| !ai::in_set_82(c)) {
            Some(p) => malformed(
                format!(
                    "AI ({id}) may not hold the character {:?}",
                    value.chars().nth(p).unwrap_or(' ')
                ),
                at + p,
            ),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// A `YYMMDD` date: day `00` is the month's last day; the century is the
/// one that puts the year within 49 years before and 50 after `this_year`.
pub fn date(yymmdd: &str, this_year: i32) -> Result<NaiveDate, String> {
    let field = |r: std::ops::Range<usize>| {
        yymmdd
            .get(r)
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| "a date is six digits, YYMMDD".to_owned())
    };
    if yymmdd.len() != 6 {
        return Err("a date is six digits, YYMMDD".to_owned());
    }
    let (yy, month, day) = (field(0..2)?, field(2..4)?, field(4..6)?);
    let year = century_window(yy as i32, this_year);
    if !(1..=12).contains(&month) {
        return Err(format!("{yymmdd} is not a date (month {month:02})"));
    }
    let found = match day {
        0 => last_day(year, month),
        d => NaiveDate::from_ymd_opt(year, month, d),
    };
    found.ok_or_else(|| {
        format!("{yymmdd} is not a date ({year}-{month:02}-{day:02} does not exist)")
    })
}

fn century_window(yy: i32, this_year: i32) -> i32 {
    let current = this_year.rem_euclid(100);
    let century = this_year - current;
    let diff = yy - current;
    if diff >= 51 {
        century - 100 + yy
    } else if diff <= -50 {
        century + 100 + yy
    } else {
        century + yy
    }
}

fn last_day(year: i32, month: u32) -> Option<NaiveDate> {
    let (y, m) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(y, m, 1).and_then(|d| d.pred_opt())
}

/// Whether the last digit is the GS1 mod-10 check digit of the others
/// (weights 3 and 1 alternating from the right, the check digit excluded).
pub fn check_digit_ok(digits: &str) -> bool {
    let bytes = digits.as_bytes();
    let Some((last, body)) = bytes.split_last() else {
        return false;
    };
    check_digit(body) == Some(*last)
}

/// The GS1 check digit (as an ASCII digit) of `body`, all ASCII digits.
pub fn check_digit(body: &[u8]) -> Option<u8> {
    let mut sum = 0u32;
    for (k, b) in body.iter().rev().enumerate() {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = u32::from(b - b'0');
        sum += if k % 2 == 0 { 3 * d } else { d };
    }
    Some(b'0' + ((10 - sum % 10) % 10) as u8)
}

/// The year a scan is read in, for the century window.
pub fn this_year(today: NaiveDate) -> i32 {
    today.year()
}

/// Whether a code that is not a valid GTIN has a GTIN's shape (8, 12, 13
/// or 14 digits): then, unless it is some medicine's in-house barcode, its
/// check digit is wrong.
pub fn gtin_shaped(code: &str) -> bool {
    matches!(code.len(), 8 | 12 | 13 | 14) && code.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests;
