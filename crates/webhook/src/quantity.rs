//! Just enough Kubernetes quantity arithmetic to compare two amounts
//! (`1` = `1000m` = `1e0`) and tell zero from non-zero.

/// The amount in nano-units, or `None` when the text is not a quantity this
/// parser understands (callers then compare the text).
pub fn nano_units(q: &str) -> Option<i128> {
    let q = q.trim();
    let (number, multiplier_num, multiplier_den): (&str, i128, i128) = {
        const BIN: [(&str, u32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
        const DEC: [(&str, i32); 9] = [
            ("n", -9),
            ("u", -6),
            ("m", -3),
            ("k", 3),
            ("M", 6),
            ("G", 9),
            ("T", 12),
            ("P", 15),
            ("E", 18),
        ];
        if let Some((s, shift)) = BIN.iter().find(|(s, _)| q.ends_with(s)) {
            (&q[..q.len() - s.len()], 1i128 << shift, 1)
        } else if let Some((s, exp)) = DEC.iter().find(|(s, _)| q.ends_with(s)) {
            let n = &q[..q.len() - s.len()];
            if *exp >= 0 {
                (n, 10i128.checked_pow(*exp as u32)?, 1)
            } else {
                (n, 1, 10i128.checked_pow((-*exp) as u32)?)
            }
        } else if let Some(pos) = q.find(['e', 'E']) {
            let exp: i32 = q[pos + 1..].parse().ok()?;
            if !(-9..=18).contains(&exp) {
                return None;
            }
            if exp >= 0 {
                (&q[..pos], 10i128.checked_pow(exp as u32)?, 1)
            } else {
                (&q[..pos], 1, 10i128.checked_pow((-exp) as u32)?)
            }
        } else {
            (q, 1, 1)
        }
    };
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((i, f)) => (i, f),
        None => (digits, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty())
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
        || frac_part.len() > 9
        || int_part.len() > 20
    {
        return None;
    }
    let int: i128 = if int_part.is_empty() { 0 } else { int_part.parse().ok()? };
    let mut frac: i128 = if frac_part.is_empty() {
        0
    } else {
        frac_part.parse().ok()?
    };
    for _ in frac_part.len()..9 {
        frac *= 10;
    }
    let nanos = int.checked_mul(1_000_000_000)?.checked_add(frac)?;
    let scaled = nanos.checked_mul(multiplier_num)?;
    if scaled % multiplier_den != 0 {
        return None;
    }
    let v = scaled / multiplier_den;
    Some(if negative { -v } else { v })
}

/// Whether two quantities are the same amount.
pub fn same_amount(a: &str, b: &str) -> bool {
    match (nano_units(a), nano_units(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Whether a quantity is zero (unparseable text is taken as non-zero).
pub fn is_zero(q: &str) -> bool {
    nano_units(q) == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
