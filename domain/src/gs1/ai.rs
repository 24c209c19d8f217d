//! The GS1 Application Identifiers the parser knows, with the length and
//! character set of each one's data (GS1 General Specifications, section 3
//! and figure 5.10.1-2). The table covers the identification, date, batch,
//! serial, quantity, measure, logistics, healthcare (national
//! reimbursement numbers) and internal identifiers a pharmacy's suppliers
//! print; an identifier outside it is an unknown AI.

/// What a field's data may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// Digits only.
    Numeric,
    /// Digits ending in a GS1 mod-10 check digit (GTIN, SSCC, GLN).
    CheckDigit,
    /// A date `YYMMDD`; `DD` may be `00` (the month's last day).
    Date,
    /// GS1 character set 82 (printable ASCII without space and a few
    /// punctuation marks).
    Alphanumeric,
}

/// How long a field's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Fixed(usize),
    /// At most this many characters, ended by FNC1 (GS) or the code's end.
    UpTo(usize),
}

/// One Application Identifier: its digits (the last `any_digit` of which
/// may be any digit, as in `310n`), its data and a short title.
#[derive(Debug, Clone, Copy)]
pub struct Ai {
    pub prefix: &'static str,
    /// A trailing digit of any value completes the identifier (the decimal
    /// point position of measures, `310n`).
    pub any_digit: bool,
    pub data: Data,
    pub length: Length,
    pub title: &'static str,
}

impl Ai {
    /// The identifier's length in digits.
    pub fn digits(&self) -> usize {
        self.prefix.len() + usize::from(self.any_digit)
    }
}

const fn ai(prefix: &'static str, data: Data, length: Length, title: &'static str) -> Ai {
    Ai {
        prefix,
        any_digit: false,
        data,
        length,
        title,
    }
}

const fn measure(prefix: &'static str, title: &'static str) -> Ai {
    Ai {
        prefix,
        any_digit: true,
        data: Data::Numeric,
        length: Length::Fixed(6),
        title,
    }
}

use Data::{Alphanumeric as X, CheckDigit as C, Date as D, Numeric as N};
use Length::{Fixed, UpTo};

/// Every identifier the parser reads. Identifiers are prefix-free: no
/// entry's digits begin another's.
pub const TABLE: &[Ai] = &[
    ai("00", C, Fixed(18), "SSCC"),
    ai("01", C, Fixed(14), "GTIN"),
    ai("02", C, Fixed(14), "CONTENT"),
    ai("10", X, UpTo(20), "BATCH/LOT"),
    ai("11", D, Fixed(6), "PROD DATE"),
    ai("12", D, Fixed(6), "DUE DATE"),
    ai("13", D, Fixed(6), "PACK DATE"),
    ai("15", D, Fixed(6), "BEST BEFORE"),
    ai("16", D, Fixed(6), "SELL BY"),
    ai("17", D, Fixed(6), "USE BY"),
    ai("20", N, Fixed(2), "VARIANT"),
    ai("21", X, UpTo(20), "SERIAL"),
    ai("22", X, UpTo(20), "CPV"),
    ai("235", X, UpTo(28), "TPX"),
    ai("240", X, UpTo(30), "ADDITIONAL ID"),
    ai("241", X, UpTo(30), "CUST. PART No."),
    ai("242", N, UpTo(6), "MTO VARIANT"),
    ai("243", X, UpTo(20), "PCN"),
    ai("250", X, UpTo(30), "SECONDARY SERIAL"),
    ai("251", X, UpTo(30), "REF. TO SOURCE"),
    ai("253", X, UpTo(30), "GDTI"),
    ai("254", X, UpTo(20), "GLN EXTENSION COMPONENT"),
    ai("255", N, UpTo(25), "GCN"),
    ai("30", N, UpTo(8), "VAR. COUNT"),
    measure("310", "NET WEIGHT (kg)"),
    measure("311", "LENGTH (m)"),
    measure("312", "WIDTH (m)"),
    measure("313", "HEIGHT (m)"),
    measure("314", "AREA (m2)"),
    measure("315", "NET VOLUME (l)"),
    measure("316", "NET VOLUME (m3)"),
    measure("330", "GROSS WEIGHT (kg)"),
    measure("337", "KG PER m2"),
    ai("37", N, UpTo(8), "COUNT"),
    ai("400", X, UpTo(30), "ORDER NUMBER"),
    ai("401", X, UpTo(30), "GINC"),
    ai("402", C, Fixed(17), "GSIN"),
    ai("403", X, UpTo(30), "ROUTE"),
    ai("410", C, Fixed(13), "SHIP TO LOC"),
    ai("411", C, Fixed(13), "BILL TO"),
    ai("412", C, Fixed(13), "PURCHASE FROM"),
    ai("413", C, Fixed(13), "SHIP FOR LOC"),
    ai("414", C, Fixed(13), "LOC No."),
    ai("415", C, Fixed(13), "PAY TO"),
    ai("416", C, Fixed(13), "PROD/SERV LOC"),
    ai("417", C, Fixed(13), "PARTY"),
    ai("420", X, UpTo(20), "SHIP TO POST"),
    ai("421", X, UpTo(12), "SHIP TO POST"),
    ai("422", N, Fixed(3), "ORIGIN"),
    ai("423", N, UpTo(15), "COUNTRY - INITIAL PROCESS."),
    ai("424", N, Fixed(3), "COUNTRY - PROCESS."),
    ai("425", N, UpTo(15), "COUNTRY - DISASSEMBLY"),
    ai("426", N, Fixed(3), "COUNTRY - FULL PROCESS"),
    ai("7001", N, Fixed(13), "NSN"),
    ai("7003", N, Fixed(10), "EXPIRY TIME"),
    ai("710", X, UpTo(20), "NHRN PZN"),
    ai("711", X, UpTo(20), "NHRN CIP"),
    ai("712", X, UpTo(20), "NHRN CN"),
    ai("713", X, UpTo(20), "NHRN DRN"),
    ai("714", X, UpTo(20), "NHRN AIM"),
    ai("715", X, UpTo(20), "NHRN NDC"),
    ai("8005", N, Fixed(6), "PRICE PER UNIT"),
    ai("8006", N, Fixed(18), "ITIP"),
    ai("8008", N, UpTo(12), "PROD TIME"),
    ai("8020", X, UpTo(25), "REF No."),
    ai("90", X, UpTo(30), "INTERNAL"),
    ai("91", X, UpTo(90), "INTERNAL"),
    ai("92", X, UpTo(90), "INTERNAL"),
    ai("93", X, UpTo(90), "INTERNAL"),
    ai("94", X, UpTo(90), "INTERNAL"),
    ai("95", X, UpTo(90), "INTERNAL"),
    ai("96", X, UpTo(90), "INTERNAL"),
    ai("97", X, UpTo(90), "INTERNAL"),
    ai("98", X, UpTo(90), "INTERNAL"),
    ai("99", X, UpTo(90), "INTERNAL"),
];

/// The identifiers whose data has a predefined length: no FNC1 follows
/// them in an element string (figure 5.10.1-2, by their first two digits).
const PREDEFINED: [&str; 22] = [
    "00", "01", "02", "03", "04", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "31",
    "32", "33", "34", "35", "36", "41",
];

/// Whether an FNC1 may be left out after this identifier's data.
pub fn predefined(ai: &Ai) -> bool {
    PREDEFINED.iter().any(|p| ai.prefix.starts_with(p))
}

/// The identifier that `digits` begins with, if any.
pub fn lookup(digits: &str) -> Option<&'static Ai> {
    TABLE.iter().find(|a| {
        digits.starts_with(a.prefix)
            && (!a.any_digit
                || digits
                    .as_bytes()
                    .get(a.prefix.len())
                    .is_some_and(u8::is_ascii_digit))
    })
}

/// The identifier written exactly as `ai` (the bracketed form), if known.
pub fn exact(ai: &str) -> Option<&'static Ai> {
    lookup(ai).filter(|a| a.digits() == ai.len())
}

/// GS1 character set 82: what alphanumeric data may hold.
pub fn in_set_82(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!\"%&'()*+,-./:;<=>?_".contains(c)
}
