//! Parsing and printing byte sizes: `4MiB`, `100MB`, `1GiB+12`, `8`.

/// Parse a size in bytes. Binary suffixes (KiB, MiB, GiB, TiB; also K, M, G,
/// T as nccl-tests reads them) multiply by powers of 1024; decimal suffixes
/// (kB, MB, GB, TB) by powers of 1000; `B` or no suffix means bytes. A `+N`
/// term adds bytes: `1GiB+12`. The error is the reason, for the caller to
/// name its flag or variable.
pub fn parse_size(input: &str) -> std::result::Result<u64, String> {
    parse_quantity(input, Unit::Bytes)
}

/// Parse an element count: a whole number, optionally with a binary
/// multiplier (`4M` is 4194304 elements, as nccl-tests reads it) and `+N`
/// terms; byte units (`4MiB`, `100MB`, `8B`) are refused, since a count is
/// not a size. The error is the reason, for the caller to name its flag.
pub fn parse_count(input: &str) -> std::result::Result<u64, String> {
    parse_quantity(input, Unit::Elements)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Bytes,
    Elements,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Elements => "elements",
        }
    }
}

fn parse_quantity(input: &str, unit: Unit) -> std::result::Result<u64, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("empty".into());
    }
    if s.starts_with('-') {
        return Err(format!(
            "a {} cannot be negative",
            match unit {
                Unit::Bytes => "size",
                Unit::Elements => "count",
            }
        ));
    }
    let mut total: u64 = 0;
    for term in s.split('+') {
        let term = term.trim();
        let split = term
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(term.len());
        let (num, suffix) = term.split_at(split);
        if num.is_empty() {
            return Err(format!("expected a number of {}", unit.name()));
        }
        let suffix = suffix.trim();
        let binary: Option<u64> = match suffix {
            "" => Some(1),
            "K" | "k" | "Ki" => Some(1 << 10),
            "M" | "m" | "Mi" => Some(1 << 20),
            "G" | "g" | "Gi" => Some(1 << 30),
            "T" | "t" | "Ti" => Some(1 << 40),
            _ => None,
        };
        let bytes_only: Option<u64> = match suffix {
            "B" | "b" => Some(1),
            "KiB" | "kiB" => Some(1 << 10),
            "MiB" => Some(1 << 20),
            "GiB" => Some(1 << 30),
            "TiB" => Some(1 << 40),
            "kB" | "KB" => Some(1_000),
            "MB" => Some(1_000_000),
            "GB" => Some(1_000_000_000),
            "TB" => Some(1_000_000_000_000),
            _ => None,
        };
        let mult = match (unit, binary, bytes_only) {
            (_, Some(m), _) => m,
            (Unit::Bytes, None, Some(m)) => m,
            (Unit::Elements, None, Some(_)) => {
                return Err(format!(
                    "{suffix:?} is a byte unit and a count is a number of elements (use --size for bytes, or K/M/G/T multipliers)"
                ))
            }
            (Unit::Bytes, None, None) => {
                return Err(format!(
                    "unknown suffix {suffix:?} (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB, or K/M/G/T = binary)"
                ))
            }
            (Unit::Elements, None, None) => {
                return Err(format!(
                    "unknown suffix {suffix:?} (a count is a whole number, optionally with K, M, G or T = binary multipliers)"
                ))
            }
        };
        let value = if num.contains('.') {
            let v: f64 = num.parse().map_err(|_| "not a number".to_string())?;
            let b = v * mult as f64;
            if !(b.is_finite() && b >= 0.0 && b < u64::MAX as f64) || b.fract() != 0.0 {
                return Err(format!("not a whole number of {}", unit.name()));
            }
            b as u64
        } else {
            let v: u64 = num.parse().map_err(|_| "too large".to_string())?;
            v.checked_mul(mult).ok_or_else(|| "too large".to_string())?
        };
        total = total
            .checked_add(value)
            .ok_or_else(|| "too large".to_string())?;
    }
    Ok(total)
}

/// Print bytes exactly and briefly: `8B`, `4KiB`, `1.5MiB`, `256MiB`,
/// `1GiB+12B`; [`parse_size`] reads every output back.
///
/// The largest binary unit not exceeding `bytes` is used when the value is a
/// whole number of units or a whole number of quarter units (`1.5MiB`,
/// `2.25GiB`); otherwise the shorter of plain bytes (`1500B`) and "unit +
/// remainder" (`1GiB+12B`, the remainder formatted the same way).
/// A byte count for a message about what is there (free memory): exact
/// when [`format_bytes`] says it briefly, else to one decimal of the largest
/// unit ("about 22.9GiB", never "24627896320B").
pub(crate) fn format_bytes_about(bytes: u64) -> String {
    let exact = format_bytes(bytes);
    if bytes < 1024 || !(exact.contains('+') || exact.trim_end_matches('B').parse::<u64>().is_ok())
    {
        return exact;
    }
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    let (unit, name) = UNITS
        .iter()
        .copied()
        .find(|(u, _)| bytes >= *u)
        .unwrap_or((1, "B"));
    format!("about {:.1}{name}", bytes as f64 / unit as f64)
}

/// A byte size the way people read it (`4 MiB`, `1.5 GiB`, `12 B`).
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    let Some(&(unit, name)) = UNITS.iter().find(|(u, _)| bytes >= *u) else {
        return format!("{bytes}B");
    };
    let (whole, rem) = (bytes / unit, bytes % unit);
    if rem == 0 {
        return format!("{whole}{name}");
    }
    if rem % (unit / 4) == 0 {
        // Quarter units: at most two decimals, exactly representable.
        let frac = (rem / (unit / 4)) * 25;
        let frac = if frac % 10 == 0 { frac / 10 } else { frac };
        return format!("{whole}.{frac}{name}");
    }
    let plain = format!("{bytes}B");
    let split = format!("{whole}{name}+{}", format_bytes(rem));
    if split.len() < plain.len() {
        split
    } else {
        plain
    }
}

#[cfg(test)]
mod tests;
