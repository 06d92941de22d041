//! Human units: sizes (`"64MiB"`, `"1.5GB"`, `"4096"`) for configuration values and
//! flags, and compact formatting of sizes and rates for output.

/// Binary and decimal size units, longest suffix first so `MiB` is tried before `B`.
const UNITS: &[(&str, u64)] = &[
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("k", 1 << 10),
    ("m", 1 << 20),
    ("g", 1 << 30),
    ("t", 1 << 40),
    ("b", 1),
];

/// Parses a byte size: a number with an optional unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`,
/// binary `K`/`M`/`G`/`T`, or decimal `KB`, `MB`, `GB`, `TB`; case-insensitive; spaces
/// allowed). The number may have a fraction when the result is a whole number of bytes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("invalid size {t:?}: a size cannot be negative"));
    }
    let lower = t.to_ascii_lowercase();
    let split = lower.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let number = number.replace('_', "");
    let unit = unit.trim();
    let factor = if unit.is_empty() {
        1
    } else {
        UNITS.iter().find(|(u, _)| *u == unit).map(|(_, f)| *f).ok_or_else(|| {
            format!("invalid size {t:?}: unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")
        })?
    };
    if number.is_empty() {
        return Err(format!("invalid size {t:?}: expected a number like 64MiB"));
    }
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(factor).ok_or_else(|| format!("invalid size {t:?}: too large"));
    }
    let value: f64 =
        number.parse().map_err(|_| format!("invalid size {t:?}: expected a number like 64MiB"))?;
    let bytes = value * factor as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("invalid size {t:?}: too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("invalid size {t:?}: not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// `bytes` in the largest binary unit that keeps the number at or above 1 (`"1.5 MiB"`).
pub(crate) fn format_size(bytes: u64) -> String {
    const NAMES: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < NAMES.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", NAMES[unit]) }
}

/// `n` and `noun`, plural when `n` is not 1: `1 segment`, `3 segments`.
pub(crate) fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A rate as a whole number with thousands separators: `412,877/s` (below 10/s, one
/// decimal: `2.5/s`).
pub(crate) fn format_rate(per_sec: f64) -> String {
    if !per_sec.is_finite() || per_sec < 0.0 {
        return "-/s".to_owned();
    }
    if per_sec < 10.0 {
        return format!("{per_sec:.1}/s");
    }
    let digits = format!("{:.0}", per_sec);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{out}/s")
}

/// Records/s and MB/s (10^6 bytes) of `records` and `bytes` done in `secs` seconds.
pub(crate) fn rates(records: u64, bytes: u64, secs: f64) -> (f64, f64) {
    let secs = secs.max(1e-9);
    (records as f64 / secs, bytes as f64 / 1e6 / secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("10 GiB"), Ok(10 << 30));
        assert_eq!(parse_size("256kib"), Ok(256 << 10));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert_eq!(parse_size("1_000"), Ok(1000));
        assert_eq!(parse_size("12B"), Ok(12));
    }

    #[test]
    fn bad_sizes_are_rejected_with_the_text() {
        for bad in ["", "MiB", "12 parsecs", "1.5", "-3", "99999999999TiB"] {
            let err = parse_size(bad).expect_err(bad);
            assert!(err.contains("invalid size"), "{bad}: {err}");
        }
        assert!(parse_size("-1MiB").expect_err("negative").contains("cannot be negative"));
    }

    #[test]
    fn counts_and_rates_read_as_a_person_writes_them() {
        assert_eq!(count(1u64, "segment"), "1 segment");
        assert_eq!(count(0u64, "problem"), "0 problems");
        assert_eq!(count(12u64, "topic"), "12 topics");
        assert_eq!(format_rate(412_876.838_4), "412,877/s");
        assert_eq!(format_rate(1_000.0), "1,000/s");
        assert_eq!(format_rate(999.6), "1,000/s");
        assert_eq!(format_rate(42.2), "42/s");
        assert_eq!(format_rate(2.54), "2.5/s");
        assert_eq!(format_rate(f64::NAN), "-/s");
    }

    #[test]
    fn sizes_format_in_binary_units() {
        assert_eq!(format_size(512), "512 B");
        assert_eq!(format_size(3 << 19), "1.5 MiB");
    }
}
