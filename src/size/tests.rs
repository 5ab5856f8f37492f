use super::*;

/// Regression (a new user's report): the out-of-memory message said
/// "24627896320B are free".
#[test]
fn free_memory_reads_approximately() {
    assert_eq!(format_bytes_about(24_627_896_320), "about 22.9GiB");
    assert_eq!(format_bytes_about(4 << 30), "4GiB");
    assert_eq!(format_bytes_about(1536), "1.5KiB");
    assert_eq!(format_bytes_about(1000), "1000B");
    assert_eq!(format_bytes_about((1 << 30) + 12), "about 1.0GiB");
    let e = crate::error::Error::OutOfMemory {
        what: "x".into(),
        memory: "host memory".into(),
        need: 16 << 40,
        available: 24_627_896_320,
        is_free: true,
        hint: "h".into(),
    };
    assert!(e.to_string().contains("but about 22.9GiB are free"), "{e}");
    // Regression: the need printed in exact bytes ("24159191310B").
    let e = crate::error::Error::OutOfMemory {
        what: "check at 1GiB+12B".into(),
        memory: "host memory".into(),
        need: 24_159_191_310,
        available: 1 << 30,
        is_free: true,
        hint: "h".into(),
    };
    assert!(
        e.to_string().contains("needs about 22.5GiB of host memory"),
        "{e}"
    );
}

#[test]
fn parses() {
    assert_eq!(parse_size("8").unwrap(), 8);
    assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
    assert_eq!(parse_size("4M").unwrap(), 4 << 20);
    assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
    assert_eq!(parse_size("1GiB+12").unwrap(), (1 << 30) + 12);
    assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
    assert_eq!(parse_size(" 2 GiB ").unwrap(), 2 << 30);
}

#[test]
fn rejects() {
    for bad in [
        "",
        "MiB",
        "4XB",
        "4 parsecs",
        "1.3B",
        "99999999999999999999",
        "20000000TiB",
    ] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    assert!(parse_size("4QiB").unwrap_err().contains("unknown suffix"));
    assert!(parse_size("-1")
        .unwrap_err()
        .to_string()
        .contains("cannot be negative"));
}

/// A count is elements, never bytes: its messages say elements (once
/// they said "not a whole number of bytes" for `--count 1.5`).
#[test]
fn counts_are_elements() {
    assert_eq!(parse_count("1003").unwrap(), 1003);
    assert_eq!(parse_count("4M").unwrap(), 4 << 20);
    assert_eq!(parse_count("1.5K").unwrap(), 1536);
    assert_eq!(parse_count("1K+3").unwrap(), 1027);
    for (bad, why) in [
        ("abc", "expected a number of elements"),
        ("1.5", "not a whole number of elements"),
        ("-1", "a count cannot be negative"),
        ("4MiB", "byte unit"),
        ("8B", "byte unit"),
        ("4X", "unknown suffix"),
        ("", "empty"),
        ("99999999999999999999", "too large"),
    ] {
        let e = parse_count(bad).unwrap_err();
        assert!(e.contains(why), "{bad:?}: {e}");
        assert!(!e.contains("number of bytes"), "{bad:?}: {e}");
    }
}

#[test]
fn formats() {
    assert_eq!(format_bytes(8), "8B");
    assert_eq!(format_bytes(4096), "4KiB");
    assert_eq!(format_bytes((1 << 30) + 12), "1GiB+12B");
    assert_eq!(format_bytes(1000), "1000B");
    assert_eq!(format_bytes(3 << 20), "3MiB");
    assert_eq!(format_bytes(0), "0B");
    assert_eq!(format_bytes(1024), "1KiB");
    assert_eq!(format_bytes(1536), "1.5KiB");
    assert_eq!(format_bytes(3 << 19), "1.5MiB");
    assert_eq!(format_bytes(5 << 18), "1.25MiB");
    assert_eq!(format_bytes(7 << 18), "1.75MiB");
    assert_eq!(format_bytes(1 << 20), "1MiB");
    assert_eq!(format_bytes(1 << 30), "1GiB");
    assert_eq!(format_bytes(8 << 30), "8GiB");
    assert_eq!(format_bytes(1500), "1500B");
    assert_eq!(format_bytes(1 << 40), "1TiB");
    assert_eq!(format_bytes((1 << 30) + (1 << 20) + 12), "1074790412B");
    assert_eq!(format_bytes((1 << 40) + (1 << 30) + 5), "1TiB+1GiB+5B");
}

#[test]
fn formatted_sizes_parse_back() {
    for b in [
        0,
        8,
        1000,
        1500,
        1536,
        4096,
        5 << 18,
        (1 << 30) + 12,
        (1 << 30) + (1 << 20) + 12,
        (3 << 40) + (1 << 39),
        u64::MAX,
    ] {
        let s = format_bytes(b);
        assert_eq!(parse_size(&s).unwrap(), b, "{s}");
    }
}
