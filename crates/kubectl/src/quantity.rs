//! Amounts as people read them: memory and storage in binary units
//! (`1Gi/512Gi`, as `kubectl top` shows memory), everything else (CPUs,
//! GPUs, counts) as a plain number of units (`2`, `1.5`, `0.25`).

/// Binary units, from the smallest: 1024¹ … 1024⁶ bytes.
const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Whether `resource` is counted in bytes: `memory`, `ephemeral-storage`,
/// `storage`, `hugepages-<size>`.
pub fn in_bytes(resource: &str) -> bool {
    matches!(resource, "memory" | "ephemeral-storage" | "storage") || resource.starts_with("hugepages-")
}

/// `milli` thousandths of a unit of `resource`, for a table.
pub fn display(resource: &str, milli: i128) -> String {
    if in_bytes(resource) && milli % 1000 == 0 {
        bytes(milli / 1000)
    } else {
        number(milli)
    }
}

/// A number of units from milli-units, exact: whole (`16`), or with the
/// decimals it has (`1.5`, `0.25`, `0.001`).
pub fn number(milli: i128) -> String {
    let sign = if milli < 0 { "-" } else { "" };
    let m = milli.unsigned_abs();
    let (whole, frac) = (m / 1000, m % 1000);
    if frac == 0 {
        return format!("{sign}{whole}");
    }
    let frac = format!("{frac:03}");
    format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
}

/// Bytes in the largest binary unit there is at least one of: `1Gi`,
/// `512Gi`, `1.5Gi` (one decimal, rounded, when not whole); under 1Ki, the
/// number of bytes.
pub fn bytes(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let n = n.unsigned_abs();
    let Some((k, unit)) = BINARY
        .iter()
        .enumerate()
        .rev()
        .map(|(i, u)| (1u128 << (10 * (i + 1)), *u))
        .find(|(k, _)| n >= *k)
    else {
        return format!("{sign}{n}");
    };
    if n.is_multiple_of(k) {
        return format!("{sign}{}{unit}", n / k);
    }
    let v = format!("{:.1}", n as f64 / k as f64);
    format!("{sign}{}{unit}", v.strip_suffix(".0").unwrap_or(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_shown_in_binary_units() {
        // What `top` printed raw before: 1073741824/549755813888.
        assert_eq!(display("memory", 1_073_741_824_000), "1Gi");
        assert_eq!(display("memory", 549_755_813_888_000), "512Gi");
        assert_eq!(display("memory", 1_610_612_736_000), "1.5Gi");
        assert_eq!(display("memory", 536_870_912_000), "512Mi");
        assert_eq!(display("memory", 1_000_000_000_000), "953.7Mi", "1G is not 1Gi");
        assert_eq!(display("memory", 1_024_000), "1Ki");
        assert_eq!(display("memory", 1_000_000), "1000");
        assert_eq!(display("memory", 0), "0");
        assert_eq!(display("ephemeral-storage", 107_374_182_400_000), "100Gi");
        assert_eq!(display("hugepages-2Mi", 2_097_152_000), "2Mi");
        assert_eq!(bytes(1 << 60), "1Ei");
        assert_eq!(bytes((1 << 30) + 1), "1Gi", "rounded to one decimal");
    }

    #[test]
    fn cpus_gpus_and_counts_are_plain_numbers() {
        assert_eq!(display("cpu", 16_000), "16");
        assert_eq!(display("cpu", 1_500), "1.5");
        assert_eq!(display("cpu", 250), "0.25");
        assert_eq!(display("cpu", 1), "0.001");
        assert_eq!(display("nvidia.com/gpu", 8_000), "8");
        assert_eq!(display("nvidia.com/mig-1g.10gb", 7_000), "7");
        assert_eq!(display("pods", 110_000), "110");
        assert_eq!(number(-1_500), "-1.5");
        // Not counted in bytes, however large.
        assert_eq!(display("nvidia.com/gpu", 1_073_741_824_000), "1073741824");
    }
}
