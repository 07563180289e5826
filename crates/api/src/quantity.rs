//! Exact Kubernetes quantities.
//!
//! Kubernetes writes amounts of a resource as strings such as `8`, `500m`,
//! `64Gi` or `1e3` (the `resource.Quantity` type). The engine needs integers
//! it can add and compare without floating-point error, so this module
//! parses every quantity into **milli-units** held in an `i128`:
//!
//! | quantity  | milli-units                 |
//! |-----------|-----------------------------|
//! | `8`       | `8_000`                     |
//! | `500m`    | `500`                       |
//! | `64Gi`    | `64 * 2^30 * 1000`          |
//! | `1.5k`    | `1_500_000`                 |
//! | `1n`      | `1` (rounded up, see below) |
//!
//! One unit for every resource keeps the arithmetic uniform: CPU, memory
//! (bytes), GPUs and MIG slices are all milli-units. An `i128` holds the
//! largest value Kubernetes accepts (2^63 - 1 base units) times 1000 with
//! room to spare, so sums over a whole cluster cannot overflow in practice.
//!
//! Grammar (from the Kubernetes API reference):
//!
//! ```text
//! quantity        ::= signedNumber suffix
//! signedNumber    ::= number | sign number          sign ::= "+" | "-"
//! number          ::= digits | digits "." digits | digits "." | "." digits
//! suffix          ::= binarySI | decimalExponent | decimalSI
//! binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
//! decimalExponent ::= "e" signedNumber | "E" signedNumber
//! ```
//!
//! Like Kubernetes, a value more precise than one milli-unit is rounded up
//! (away from zero): `0.1m` and `1n` both become `1m`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Milli-units per base unit.
pub const MILLI_PER_UNIT: i128 = 1000;

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityErrorKind {
    /// The string is empty.
    #[error("is empty")]
    Empty,
    /// The string does not follow the quantity grammar.
    #[error("is not a Kubernetes quantity (expected forms like 8, 500m, 1.5, 64Gi, 1e3)")]
    Syntax,
    /// The suffix is not one of the known SI, binary or exponent suffixes.
    #[error("has unknown suffix {0:?} (use one of n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or e<N>)")]
    UnknownSuffix(String),
    /// The value does not fit in the supported range.
    #[error("is too large")]
    Overflow,
    /// The value is negative where only non-negative values make sense.
    #[error("must not be negative")]
    Negative,
}

/// A quantity that could not be parsed, naming the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: quantity {value:?} {kind}")]
pub struct QuantityError {
    /// Field path of the offending value, e.g.
    /// `spec.resourceGroups[0].flavors[1].resources[0].nominalQuota`.
    pub field: String,
    /// The value as written.
    pub value: String,
    /// What is wrong with it.
    pub kind: QuantityErrorKind,
}

/// Parses a quantity string into milli-units.
///
/// `field` names where the value came from; it is only used in the error.
///
/// ```
/// use sluice_api::quantity::parse_milli;
/// assert_eq!(parse_milli("spec.x", "500m").unwrap(), 500);
/// assert_eq!(parse_milli("spec.x", "2").unwrap(), 2000);
/// assert_eq!(parse_milli("spec.x", "1Ki").unwrap(), 1024 * 1000);
/// assert!(parse_milli("spec.x", "ten").is_err());
/// ```
pub fn parse_milli(field: &str, value: &str) -> Result<i128, QuantityError> {
    parse_scaled(value, 3).map_err(|kind| QuantityError {
        field: field.to_string(),
        value: value.to_string(),
        kind,
    })
}

/// Milli-units of a [`Quantity`] for any resource (CPU cores, bytes, GPUs…).
///
/// ```
/// use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
/// use sluice_api::quantity::milli;
/// let q = Quantity("64Gi".into());
/// assert_eq!(milli("spec.memory", &q).unwrap(), 64 * (1 << 30) * 1000);
/// ```
pub fn milli(field: &str, quantity: &Quantity) -> Result<i128, QuantityError> {
    parse_milli(field, &quantity.0)
}

/// Like [`milli`], but rejects negative amounts (quota, usage, requests).
pub fn non_negative_milli(field: &str, quantity: &Quantity) -> Result<i128, QuantityError> {
    let value = milli(field, quantity)?;
    if value < 0 {
        return Err(QuantityError {
            field: field.to_string(),
            value: quantity.0.clone(),
            kind: QuantityErrorKind::Negative,
        });
    }
    Ok(value)
}

/// Whether two quantities are the same amount (`1` = `1000m` = `1e0`), to
/// the nano-unit; text that is not a quantity is compared as text.
pub fn same_amount(a: &str, b: &str) -> bool {
    match (nano_units(a), nano_units(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Whether a quantity is zero (text that is not a quantity is taken as
/// non-zero).
pub fn is_zero(q: &str) -> bool {
    nano_units(q) == Some(0)
}

/// The amount in nano-units, the finest Kubernetes keeps (a finer value is
/// rounded up, as [`parse_milli`] rounds), or `None` when the text is not a
/// quantity. Surrounding whitespace is ignored.
pub fn nano_units(q: &str) -> Option<i128> {
    parse_scaled(q.trim(), 9).ok()
}

/// The amount in units of 10^-`unit_exp` (3: milli-units, 9: nano-units).
fn parse_scaled(input: &str, unit_exp: i64) -> Result<i128, QuantityErrorKind> {
    if input.is_empty() {
        return Err(QuantityErrorKind::Empty);
    }
    let (negative, rest) = match input.as_bytes()[0] {
        b'+' => (false, &input[1..]),
        b'-' => (true, &input[1..]),
        _ => (false, input),
    };
    let (number, suffix) = split_number(rest)?;
    let (decimal_exp, binary_pow) = parse_suffix(suffix)?;

    // Collect the significant digits of the number as an integer mantissa and
    // a power of ten: number = mantissa * 10^exp10.
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    let digits = int_part.bytes().chain(frac_part.bytes());
    let mut mantissa: u128 = 0;
    let mut exp10: i64 = -(frac_part.len() as i64);
    let mut started = false;
    let mut pending_zeros: i64 = 0;
    for d in digits {
        let v = u128::from(d - b'0');
        if v == 0 {
            if started {
                // Defer trailing zeros: they only matter if a non-zero digit follows.
                pending_zeros += 1;
            }
            continue;
        }
        started = true;
        for _ in 0..pending_zeros {
            mantissa = mantissa.checked_mul(10).ok_or(QuantityErrorKind::Overflow)?;
        }
        pending_zeros = 0;
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(v))
            .ok_or(QuantityErrorKind::Overflow)?;
    }
    exp10 += pending_zeros;
    if mantissa == 0 {
        return Ok(0);
    }

    // Scale: milli = mantissa * 10^(exp10 + decimal_exp + 3) * 2^binary_pow
    // (nano: + 9).
    let mut scaled = mantissa;
    if binary_pow > 0 {
        scaled = scaled
            .checked_mul(1u128 << binary_pow)
            .ok_or(QuantityErrorKind::Overflow)?;
    }
    let total_exp = exp10 + decimal_exp + unit_exp;
    let magnitude = if total_exp >= 0 {
        let factor = pow10(total_exp).ok_or(QuantityErrorKind::Overflow)?;
        scaled.checked_mul(factor).ok_or(QuantityErrorKind::Overflow)?
    } else {
        match pow10(-total_exp) {
            // Round up: any remainder adds one milli-unit.
            Some(divisor) => scaled.div_ceil(divisor),
            // 10^-total_exp exceeds u128::MAX > scaled: a positive value below 1m.
            None => 1,
        }
    };
    let magnitude = i128::try_from(magnitude).map_err(|_| QuantityErrorKind::Overflow)?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// Splits `rest` (sign removed) into the number and the suffix.
fn split_number(rest: &str) -> Result<(&str, &str), QuantityErrorKind> {
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let dots = number.bytes().filter(|&b| b == b'.').count();
    let has_digit = number.bytes().any(|b| b.is_ascii_digit());
    if !has_digit || dots > 1 {
        return Err(QuantityErrorKind::Syntax);
    }
    Ok((number, suffix))
}

/// Returns (power of ten, power of two) for a suffix.
fn parse_suffix(suffix: &str) -> Result<(i64, u32), QuantityErrorKind> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(exp) = decimal {
        return Ok((exp, 0));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(pow) = binary {
        return Ok((0, pow));
    }
    if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
        let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(QuantityErrorKind::Syntax);
        }
        // Exponents beyond a few hundred cannot produce a representable value.
        let value: i64 = exp.parse().map_err(|_| QuantityErrorKind::Overflow)?;
        if value.abs() > 1000 {
            return Err(QuantityErrorKind::Overflow);
        }
        return Ok((value, 0));
    }
    if suffix.bytes().all(|b| b.is_ascii_alphanumeric()) && !suffix.is_empty() {
        return Err(QuantityErrorKind::UnknownSuffix(suffix.to_string()));
    }
    Err(QuantityErrorKind::Syntax)
}

fn pow10(exp: i64) -> Option<u128> {
    let exp = u32::try_from(exp).ok()?;
    10u128.checked_pow(exp)
}

/// How to print a whole number of base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Decimal SI suffixes: `8`, `2k`, `3M`.
    DecimalSi,
    /// Binary suffixes when exact: `64Gi`, `512Mi`, else plain bytes.
    BinarySi,
}

/// The natural format for a resource: binary for byte-valued resources
/// (`memory`, `ephemeral-storage`, `storage`, `hugepages-*`), decimal otherwise.
pub fn format_for_resource(resource: &str) -> Format {
    if matches!(resource, "memory" | "ephemeral-storage" | "storage")
        || resource.starts_with("hugepages-")
        || resource.ends_with("/memory")
    {
        Format::BinarySi
    } else {
        Format::DecimalSi
    }
}

/// Formats milli-units as a canonical Kubernetes quantity string.
///
/// Fractions of a unit print as milli (`500m`, `1500m`); whole numbers print
/// with the largest suffix that keeps them exact.
///
/// ```
/// use sluice_api::quantity::{format_milli, Format};
/// assert_eq!(format_milli(8000, Format::DecimalSi), "8");
/// assert_eq!(format_milli(500, Format::DecimalSi), "500m");
/// assert_eq!(format_milli(64 * (1 << 30) * 1000, Format::BinarySi), "64Gi");
/// ```
pub fn format_milli(milli: i128, format: Format) -> String {
    if milli % MILLI_PER_UNIT != 0 {
        return format!("{milli}m");
    }
    let units = milli / MILLI_PER_UNIT;
    if units == 0 {
        return "0".to_string();
    }
    match format {
        Format::BinarySi => {
            const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            for (i, suffix) in SUFFIXES.iter().enumerate().rev() {
                let base = 1i128 << (10 * (i + 1));
                if units % base == 0 {
                    return format!("{}{suffix}", units / base);
                }
            }
            units.to_string()
        }
        Format::DecimalSi => {
            const SUFFIXES: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
            for (i, suffix) in SUFFIXES.iter().enumerate().rev() {
                let base = 10i128.pow(3 * (i as u32 + 1));
                if units % base == 0 {
                    return format!("{}{suffix}", units / base);
                }
            }
            units.to_string()
        }
    }
}

/// The GPU-equivalent: what resource transformations turn MIG slices and
/// time-sliced replicas into, so that one quota counts every way a GPU is
/// shared.
pub const GPU_EQUIVALENT: &str = "sluice.dev/gpu-equivalent";

/// Engine units in one GPU-equivalent: 720 720, the least common multiple
/// of 1 to 16, so that every fraction of a GPU with a denominator up to 16
/// (a seventh for a 1g MIG slice, a quarter for one of four replicas) is a
/// whole number of units and sums stay exact.
pub const GPU_EQUIVALENT_UNITS: i128 = 720_720;

/// Engine units in one whole unit of `resource`: milli-units (1 000) for
/// every resource but the GPU-equivalent ([`GPU_EQUIVALENT_UNITS`]).
pub fn units_per_whole(resource: &str) -> i128 {
    if resource == GPU_EQUIVALENT {
        GPU_EQUIVALENT_UNITS
    } else {
        MILLI_PER_UNIT
    }
}

/// Parses a quantity of `resource` into its engine units
/// ([`units_per_whole`]): milli-units, rounded up as [`parse_milli`]
/// does; GPU-equivalents to the nearest 1/720 720.
pub fn parse_amount(resource: &str, field: &str, value: &str) -> Result<i128, QuantityError> {
    if units_per_whole(resource) == MILLI_PER_UNIT {
        return parse_milli(field, value);
    }
    let nano = parse_scaled(value, 9).map_err(|kind| QuantityError {
        field: field.to_string(),
        value: value.to_string(),
        kind,
    })?;
    let per = units_per_whole(resource);
    let scaled = nano.checked_mul(per).ok_or_else(|| QuantityError {
        field: field.to_string(),
        value: value.to_string(),
        kind: QuantityErrorKind::Overflow,
    })?;
    let nano_per_unit = 1_000_000_000;
    Ok((scaled + nano_per_unit / 2 * scaled.signum()) / nano_per_unit)
}

/// [`parse_amount`] of a [`Quantity`], refusing negative amounts (quota,
/// usage, requests).
pub fn non_negative_amount(resource: &str, field: &str, quantity: &Quantity) -> Result<i128, QuantityError> {
    let value = parse_amount(resource, field, &quantity.0)?;
    if value < 0 {
        return Err(QuantityError {
            field: field.to_string(),
            value: quantity.0.clone(),
            kind: QuantityErrorKind::Negative,
        });
    }
    Ok(value)
}

/// Engine units of `resource` as milli-units (exact for every resource but
/// the GPU-equivalent, which rounds to the nearest milli-unit).
pub fn to_milli(resource: &str, amount: i128) -> i128 {
    let per = units_per_whole(resource);
    if per == MILLI_PER_UNIT {
        return amount;
    }
    (amount * MILLI_PER_UNIT + per / 2 * amount.signum()) / per
}

/// Milli-units of `resource` as its engine units: the inverse of
/// [`to_milli`] (rounded to the nearest unit).
pub fn from_milli(resource: &str, milli: i128) -> i128 {
    let per = units_per_whole(resource);
    if per == MILLI_PER_UNIT {
        return milli;
    }
    (milli * per + MILLI_PER_UNIT / 2 * milli.signum()) / MILLI_PER_UNIT
}

/// Engine units of `resource` as a canonical quantity string: milli-units
/// as [`format_milli`] prints them; a GPU-equivalent as a whole number or
/// a decimal to the nano-unit (`0.142857143`), which [`parse_amount`]
/// reads back exactly.
pub fn format_amount(resource: &str, amount: i128) -> String {
    let per = units_per_whole(resource);
    if per == MILLI_PER_UNIT {
        return format_milli(amount, format_for_resource(resource));
    }
    if amount % per == 0 {
        return (amount / per).to_string();
    }
    let nano = (amount * 1_000_000_000 + per / 2 * amount.signum()) / per;
    let sign = if nano < 0 { "-" } else { "" };
    let n = nano.unsigned_abs();
    let frac = format!("{:09}", n % 1_000_000_000);
    format!("{sign}{}.{}", n / 1_000_000_000, frac.trim_end_matches('0'))
}

/// Engine units of `resource` (see [`units_per_whole`]) as a [`Quantity`]
/// in its natural format.
pub fn to_quantity(resource: &str, amount: i128) -> Quantity {
    Quantity(format_amount(resource, amount))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<i128, QuantityErrorKind> {
        parse_milli("f", s).map_err(|e| e.kind)
    }

    #[test]
    fn plain_and_decimal_suffixes() {
        assert_eq!(p("0"), Ok(0));
        assert_eq!(p("8"), Ok(8_000));
        assert_eq!(p("+8"), Ok(8_000));
        assert_eq!(p("-8"), Ok(-8_000));
        assert_eq!(p("500m"), Ok(500));
        assert_eq!(p("1.5"), Ok(1_500));
        assert_eq!(p("1."), Ok(1_000));
        assert_eq!(p(".5"), Ok(500));
        assert_eq!(p("2k"), Ok(2_000_000));
        assert_eq!(p("1.5k"), Ok(1_500_000));
        assert_eq!(p("3M"), Ok(3_000_000_000));
        assert_eq!(p("1G"), Ok(10i128.pow(12)));
        assert_eq!(p("1T"), Ok(10i128.pow(15)));
        assert_eq!(p("1P"), Ok(10i128.pow(18)));
        assert_eq!(p("1E"), Ok(10i128.pow(21)));
        assert_eq!(p("1000u"), Ok(1));
        assert_eq!(p("1000000n"), Ok(1));
        assert_eq!(p("007"), Ok(7_000));
        assert_eq!(p("100"), Ok(100_000));
        assert_eq!(p("0.000"), Ok(0));
        assert_eq!(p("-0"), Ok(0));
    }

    #[test]
    fn binary_suffixes() {
        assert_eq!(p("1Ki"), Ok(1024 * 1000));
        assert_eq!(p("64Gi"), Ok(64 * (1i128 << 30) * 1000));
        assert_eq!(p("1.5Gi"), Ok(1536 * (1i128 << 20) * 1000));
        assert_eq!(p("1Ei"), Ok((1i128 << 60) * 1000));
        assert_eq!(p("512Mi"), Ok(512 * (1i128 << 20) * 1000));
        assert_eq!(p("1Ti"), Ok((1i128 << 40) * 1000));
        assert_eq!(p("1Pi"), Ok((1i128 << 50) * 1000));
        // A fraction of a byte rounds up to a whole milli-byte.
        assert_eq!(p("0.0000001Ki"), Ok(1));
    }

    #[test]
    fn exponents() {
        assert_eq!(p("1e3"), Ok(1_000_000));
        assert_eq!(p("1E3"), Ok(1_000_000));
        assert_eq!(p("1e+3"), Ok(1_000_000));
        assert_eq!(p("1e-3"), Ok(1));
        assert_eq!(p("1.5e1"), Ok(15_000));
        assert_eq!(p("12e-4"), Ok(2)); // 1.2m rounds up
        assert_eq!(p("1e0"), Ok(1_000));
    }

    #[test]
    fn rounding_is_up_away_from_zero() {
        assert_eq!(p("0.1m"), Ok(1));
        assert_eq!(p("1n"), Ok(1));
        assert_eq!(p("1001u"), Ok(2));
        assert_eq!(p("-1n"), Ok(-1));
        assert_eq!(p("1.0001"), Ok(1_001));
        assert_eq!(p("1e-40"), Ok(1));
        assert_eq!(p("0.00000000000000000000000000000000000000000001"), Ok(1));
    }

    #[test]
    fn long_but_exact_numbers() {
        assert_eq!(p("1000000000000000000000000000000m"), Ok(10i128.pow(30)));
        assert_eq!(p("1.000000000000000000000000000000"), Ok(1_000));
        assert_eq!(p("9223372036854775807"), Ok(9_223_372_036_854_775_807_000));
    }

    #[test]
    fn overflow() {
        assert_eq!(p("1e40"), Err(QuantityErrorKind::Overflow));
        assert_eq!(p("1e99999999999"), Err(QuantityErrorKind::Overflow));
        assert_eq!(
            p("999999999999999999999999999999999999999999"),
            Err(QuantityErrorKind::Overflow)
        );
        assert_eq!(
            p("200000000000000000000000000000000000Ei"),
            Err(QuantityErrorKind::Overflow)
        );
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(p(""), Err(QuantityErrorKind::Empty));
        for bad in [
            ".", "-", "+", "1.2.3", "Gi", "1 Gi", " 1", "1Gi ", "--1", "1e", "1e+", "1ee3", "1e3.5", "0x10", "1,5",
        ] {
            assert!(p(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(p("1K"), Err(QuantityErrorKind::UnknownSuffix("K".into())));
        assert_eq!(p("1ki"), Err(QuantityErrorKind::UnknownSuffix("ki".into())));
        assert_eq!(p("1gb"), Err(QuantityErrorKind::UnknownSuffix("gb".into())));
    }

    #[test]
    fn errors_name_field_and_value() {
        let err = parse_milli("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota", "8 GPUs").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: quantity \"8 GPUs\""),
            "{text}"
        );
        let neg = non_negative_milli("spec.q", &Quantity("-1".into())).unwrap_err();
        assert_eq!(neg.kind, QuantityErrorKind::Negative);
        assert_eq!(neg.to_string(), "spec.q: quantity \"-1\" must not be negative");
    }

    #[test]
    fn formatting() {
        assert_eq!(format_milli(0, Format::DecimalSi), "0");
        assert_eq!(format_milli(8_000, Format::DecimalSi), "8");
        assert_eq!(format_milli(500, Format::DecimalSi), "500m");
        assert_eq!(format_milli(1_500, Format::DecimalSi), "1500m");
        assert_eq!(format_milli(2_000_000, Format::DecimalSi), "2k");
        assert_eq!(format_milli(-3_000, Format::DecimalSi), "-3");
        assert_eq!(format_milli(64 * (1 << 30) * 1000, Format::BinarySi), "64Gi");
        assert_eq!(format_milli(1536 * (1 << 20) * 1000, Format::BinarySi), "1536Mi");
        assert_eq!(format_milli(1_500_000, Format::BinarySi), "1500");
        assert_eq!(format_milli(1_000, Format::BinarySi), "1");
        assert_eq!(to_quantity("memory", 1024 * 1000).0, "1Ki");
        assert_eq!(to_quantity("nvidia.com/gpu", 16_000).0, "16");
        assert_eq!(to_quantity("hugepages-2Mi", 2 * (1 << 20) * 1000).0, "2Mi");
    }

    #[test]
    fn format_then_parse_round_trips() {
        for milli in [
            0i128,
            1,
            999,
            1_000,
            1_001,
            123_456_789,
            64 * (1 << 30) * 1000,
            10i128.pow(21),
        ] {
            for format in [Format::DecimalSi, Format::BinarySi] {
                let text = format_milli(milli, format);
                assert_eq!(p(&text), Ok(milli), "{text}");
            }
        }
    }

    #[test]
    fn equal_amounts_in_different_spellings() {
        for (a, b) in [
            ("1", "1000m"),
            ("1", "1.0"),
            ("2", "2e0"),
            ("1k", "1000"),
            ("1Ki", "1024"),
            ("0.5", "500m"),
            ("1", "+1"),
        ] {
            assert!(same_amount(a, b), "{a} vs {b}");
        }
        assert!(!same_amount("1", "2"));
        assert!(!same_amount("1500m", "1"));
        assert!(same_amount("weird", "weird"));
        assert!(!same_amount("weird", "1"));
    }

    #[test]
    fn zero_is_recognised() {
        assert!(is_zero("0"));
        assert!(is_zero("0m"));
        assert!(!is_zero("1"));
        assert!(!is_zero("junk"));
        assert_eq!(nano_units("1.5"), Some(1_500_000_000));
        assert_eq!(nano_units("-2m"), Some(-2_000_000));
        assert_eq!(nano_units(""), None);
        assert_eq!(nano_units("."), None);
    }

    #[test]
    fn gpu_equivalents_are_exact_in_sevenths_and_quarters() {
        let eq = GPU_EQUIVALENT;
        assert_eq!(parse_amount(eq, "f", "8").unwrap(), 8 * GPU_EQUIVALENT_UNITS);
        assert_eq!(parse_amount(eq, "f", "0.25").unwrap(), GPU_EQUIVALENT_UNITS / 4);
        assert_eq!(format_amount(eq, GPU_EQUIVALENT_UNITS / 4), "0.25");
        let seventh = GPU_EQUIVALENT_UNITS / 7;
        let text = format_amount(eq, seventh);
        assert_eq!(text, "0.142857143");
        assert_eq!(parse_amount(eq, "f", &text).unwrap(), seventh, "read back exactly");
        for n in 1..=200 {
            let a = seventh * n;
            assert_eq!(parse_amount(eq, "f", &format_amount(eq, a)).unwrap(), a, "{n} sevenths");
        }
        assert_eq!(format_amount(eq, 8 * GPU_EQUIVALENT_UNITS), "8");
        assert_eq!(to_milli(eq, seventh), 143);
        // Every other resource keeps milli-units.
        assert_eq!(parse_amount("nvidia.com/gpu", "f", "8").unwrap(), 8000);
        assert_eq!(format_amount("memory", 64 * (1 << 30) * 1000), "64Gi");
        assert_eq!(to_milli("cpu", 500), 500);
        let err = non_negative_amount(eq, "spec.x", &Quantity("-1".into())).unwrap_err();
        assert_eq!(err.kind, QuantityErrorKind::Negative);
    }
}
