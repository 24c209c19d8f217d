//! The parser against the GS1 General Specifications' own rules and
//! examples, a round trip of random valid element strings in the three
//! FNC1 forms, and arbitrary input.

use chrono::NaiveDate;
use proptest::prelude::*;

use super::ai::{self, Data, Length, TABLE};
use super::{check_digit, check_digit_ok, date, read, Element, Gtin, Scanned, MAX_CODE_CHARS};

const YEAR: i32 = 2026;
const GS: char = '\u{1d}';

fn gs1(code: &str) -> super::ElementString {
    match read(code, YEAR) {
        Ok(Scanned::Gs1(e)) => e,
        other => panic!("{code:?} read as {other:?}"),
    }
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

#[test]
fn check_digits_of_the_specifications_examples() {
    // GTIN-13, GTIN-12 (UPC-A), GTIN-8 and a GTIN-14 of the GS1 examples.
    for valid in [
        "4006381333931",
        "036000291452",
        "96385074",
        "09501101530003",
    ] {
        assert!(check_digit_ok(valid), "{valid}");
    }
    assert!(!check_digit_ok("4006381333932"));
    assert_eq!(check_digit(b"950110153000"), Some(b'3'));
    assert_eq!(check_digit(b"37610425002123456"), Some(b'9'));
    // A GTIN-13 and the GTIN-14 made of it with a leading zero are one product.
    assert_eq!(Gtin::parse("4006381333931"), Gtin::parse("04006381333931"));
    assert_eq!(
        Gtin::parse("96385074").map(|g| g.to_string()),
        Some("00000096385074".to_owned())
    );
    assert_eq!(Gtin::parse("4006381333932"), None);
    assert_eq!(Gtin::parse("400638133393"), None);
}

#[test]
fn the_human_readable_form() {
    let e = gs1("(01)09501101530003(17)271231(10)AB-123(21)SN0001");
    assert_eq!(
        e.gtin().map(|g| g.to_string()).as_deref(),
        Some("09501101530003")
    );
    assert_eq!(e.expiry(), Some(day(2027, 12, 31)));
    assert_eq!(e.batch(), Some("AB-123"));
    assert_eq!(e.serial(), Some("SN0001"));
}

#[test]
fn the_three_fnc1_forms_read_alike() {
    let human = gs1("(01)09501101530003(17)271231(10)AB-123(21)SN0001");
    // GTIN and expiry have predefined lengths: no FNC1 after them.
    let body = format!("01095011015300031727123110AB-123{GS}21SN0001");
    for code in [
        format!("]d2{body}"),
        format!("]C1{body}"),
        format!("]Q3{body}"),
        body.clone(),
        format!("{GS}{body}\r\n"),
    ] {
        assert_eq!(gs1(&code).elements, human.elements, "{code:?}");
    }
}

#[test]
fn day_00_is_the_months_last_day() {
    assert_eq!(date("270200", YEAR), Ok(day(2027, 2, 28)));
    assert_eq!(date("280200", YEAR), Ok(day(2028, 2, 29)));
    assert_eq!(date("261200", YEAR), Ok(day(2026, 12, 31)));
    assert_eq!(gs1("(17)270400").expiry(), Some(day(2027, 4, 30)));
    assert!(date("270230", YEAR).is_err());
    assert!(date("271301", YEAR).is_err());
    assert!(date("270001", YEAR).is_err());
}

#[test]
fn two_digit_years_take_the_fifty_year_window() {
    // Read in 2026: 76 is 2076, 77 is 1977 (section 7.12).
    assert_eq!(date("760101", YEAR), Ok(day(2076, 1, 1)));
    assert_eq!(date("770101", YEAR), Ok(day(1977, 1, 1)));
    assert_eq!(date("991231", 2051), Ok(day(2099, 12, 31)));
    assert_eq!(date("000101", 2051), Ok(day(2100, 1, 1)));
}

#[test]
fn fixed_and_variable_lengths() {
    let e = gs1("]d20109501101530003310300015030123");
    assert_eq!(
        e.elements,
        vec![
            Element {
                ai: "01".into(),
                value: "09501101530003".into()
            },
            Element {
                ai: "3103".into(),
                value: "000150".into()
            },
            Element {
                ai: "30".into(),
                value: "123".into()
            },
        ]
    );
    assert_eq!(e.count(), Some(123));
    let e = gs1(&format!("]C10109501101530003{GS}3712{GS}7102ABC"));
    assert_eq!(e.count(), Some(12));
    assert_eq!(
        e.elements[2],
        Element {
            ai: "710".into(),
            value: "2ABC".into()
        }
    );
    // A variable field runs to FNC1 or the end: at most its length.
    let long = "X".repeat(21);
    let err = read(&format!("]d20109501101530003{GS}10{long}"), YEAR).unwrap_err();
    assert!(err.what.contains("at most 20"), "{err}");
    assert!(read(&format!("(10){long}"), YEAR).is_err());
}

#[test]
fn malformed_codes_say_what_and_where() {
    let cases = [
        ("]d20109501101530004", "check digit"),
        ("]d20109501101530003891234", "Application Identifier"),
        ("]d2010950110153000317271331", "not a date"),
        ("]d20109501101530003172702", "needs 6"),
        ("(01)0950110153000", "exactly 14"),
        ("(89)1234", "not a known"),
        ("(10)AB CD", "may not hold"),
        ("(01)0950110153000X", "digits only"),
        ("]d2", "no GS1 field"),
        ("(17)270231", "not a date"),
    ];
    for (code, what) in cases {
        match read(code, YEAR) {
            Err(e) => {
                assert!(e.what.contains(what), "{code:?}: {e}");
                assert!(
                    e.at >= 1 && e.at <= code.chars().count() + 1,
                    "{code:?}: {e}"
                );
            }
            other => panic!("{code:?} read as {other:?}"),
        }
    }
    let e = read("]d20109501101530003891234", YEAR).unwrap_err();
    assert_eq!(e.at, 20, "the unknown AI starts at character 20");
}

#[test]
fn bare_gtins_and_in_house_codes() {
    assert_eq!(
        read("4006381333931\r\n", YEAR),
        Ok(Scanned::Gtin(Gtin::parse("04006381333931").unwrap()))
    );
    assert_eq!(
        read("036000291452", YEAR),
        Ok(Scanned::Gtin(Gtin::parse("0036000291452").unwrap()))
    );
    for other in ["PANADOL-500", "12345", "4006381333932", "INV 0001"] {
        assert_eq!(read(other, YEAR), Ok(Scanned::Other(other.to_owned())));
    }
    assert!(super::gtin_shaped("4006381333932"));
    assert!(!super::gtin_shaped("PANADOL-500"));
    // Over the longest code a scanner sends.
    assert!(read(&"1".repeat(MAX_CODE_CHARS + 1), YEAR).is_err());
}

/// A valid value for an identifier's data.
fn value_for(a: &'static ai::Ai) -> BoxedStrategy<String> {
    let len = match a.length {
        Length::Fixed(n) => n..=n,
        Length::UpTo(max) => 1..=max,
    };
    match a.data {
        Data::Numeric => proptest::collection::vec(0u8..10, len)
            .prop_map(|d| d.iter().map(|d| char::from(b'0' + d)).collect())
            .boxed(),
        Data::CheckDigit => {
            let n = match a.length {
                Length::Fixed(n) | Length::UpTo(n) => n,
            };
            proptest::collection::vec(0u8..10, n - 1)
                .prop_map(|d| {
                    let body: Vec<u8> = d.iter().map(|d| b'0' + d).collect();
                    let mut s = String::from_utf8(body.clone()).unwrap_or_default();
                    s.push(char::from(check_digit(&body).unwrap_or(b'0')));
                    s
                })
                .boxed()
        }
        Data::Date => (0u32..100, 1u32..=12, 0u32..=28)
            .prop_map(|(y, m, d)| format!("{y:02}{m:02}{d:02}"))
            .boxed(),
        Data::Alphanumeric => proptest::collection::vec(
            proptest::sample::select(
                "ABCXYZabcxyz0123456789!\"%&'()*+,-./:;<=>?_"
                    .chars()
                    .collect::<Vec<_>>(),
            ),
            len,
        )
        .prop_map(|c| c.into_iter().collect())
        .boxed(),
    }
}

fn element() -> impl Strategy<Value = (&'static ai::Ai, String, String)> {
    proptest::sample::select(TABLE.to_vec())
        .prop_flat_map(|a| {
            let a: &'static ai::Ai = TABLE
                .iter()
                .find(|t| t.prefix == a.prefix)
                .unwrap_or(&TABLE[0]);
            (Just(a), 0u8..10, value_for(a))
        })
        .prop_map(|(a, n, v)| {
            let id = if a.any_digit {
                format!("{}{n}", a.prefix)
            } else {
                a.prefix.to_owned()
            };
            (a, id, v)
        })
}

/// An element string in the raw form: FNC1 after every field whose length
/// is not predefined, but the last.
fn raw(fields: &[(&'static ai::Ai, String, String)]) -> String {
    let mut out = String::new();
    for (k, (a, id, v)) in fields.iter().enumerate() {
        out.push_str(id);
        out.push_str(v);
        if k + 1 < fields.len() && !(ai::predefined(a) && matches!(a.length, Length::Fixed(_))) {
            out.push(GS);
        }
    }
    out
}

proptest! {
    #[test]
    fn valid_element_strings_read_back(fields in proptest::collection::vec(element(), 1..6)) {
        let expected: Vec<Element> = fields
            .iter()
            .map(|(_, id, v)| Element { ai: id.clone(), value: v.clone() })
            .collect();
        let body = raw(&fields);
        for code in [format!("]d2{body}"), format!("]C1{body}"), format!("]Q3{body}")] {
            match read(&code, YEAR) {
                Ok(Scanned::Gs1(e)) => prop_assert_eq!(&e.elements, &expected),
                other => prop_assert!(false, "{:?} read as {:?}", code, other),
            }
        }
        // The human-readable form, where no value holds a parenthesis.
        if fields.iter().all(|(_, _, v)| !v.contains('(')) {
            let human: String = fields.iter().map(|(_, id, v)| format!("({id}){v}")).collect();
            match read(&human, YEAR) {
                Ok(Scanned::Gs1(e)) => prop_assert_eq!(&e.elements, &expected),
                other => prop_assert!(false, "{:?} read as {:?}", human, other),
            }
        }
    }

    #[test]
    fn arbitrary_input_never_panics(code in "\\PC{0,600}") {
        let _ = read(&code, YEAR);
    }

    #[test]
    fn near_misses_never_panic(
        body in "[0-9A-Z()\\x1d\\]]{0,600}",
        prefix in proptest::sample::select(vec!["", "]d2", "]C1", "(", "(01)", "01"]),
    ) {
        let _ = read(&format!("{prefix}{body}"), YEAR);
    }
}
