//! How wide a label renders (no font is loaded: advance widths of a wide
//! sans-serif font), and labels cut to fit.

/// Advance widths in em of DejaVu Sans, a wide sans-serif font (so other
/// fonts rarely render wider), by groups of characters.
const CHAR_EMS: [(&str, f64); 27] = [
    ("ijl'", 0.278),
    ("IJ", 0.295),
    (" .,·", 0.319),
    (":;/|", 0.337),
    ("f-", 0.361),
    ("t", 0.392),
    ("()[]", 0.39),
    ("r!", 0.411),
    ("\"", 0.46),
    ("*_", 0.5),
    ("sz?", 0.531),
    ("cLF", 0.575),
    ("kvxy", 0.592),
    ("PTY", 0.611),
    ("aeo", 0.615),
    ("bdghnpquES{}µ0123456789", 0.636),
    ("K", 0.656),
    ("ABVXZR", 0.695),
    ("C", 0.698),
    ("UNH", 0.752),
    ("DG", 0.775),
    ("&OQ", 0.787),
    ("w", 0.818),
    ("+×=<>#~^", 0.838),
    ("M", 0.863),
    ("%", 0.95),
    ("mW", 0.989),
];

/// Estimated advance width of `c` in em (1 em outside [`CHAR_EMS`]),
/// rounded up within each group.
fn char_em(c: char) -> f64 {
    CHAR_EMS
        .iter()
        .find(|(chars, _)| chars.contains(c))
        .map_or(1.0, |(_, em)| *em)
}

/// Estimated width of `s` in px at `font_px`.
pub(super) fn text_width(s: &str, font_px: f64) -> f64 {
    s.chars().map(char_em).sum::<f64>() * font_px
}

/// `s`, or its longest prefix followed by `…` that fits in `max_px`.
pub(super) fn fit_text(s: &str, font_px: f64, max_px: f64) -> String {
    if text_width(s, font_px) <= max_px {
        return s.to_string();
    }
    let budget = max_px - text_width("…", font_px);
    let mut out = String::new();
    let mut w = 0.0;
    for c in s.chars() {
        w += char_em(c) * font_px;
        if w > budget {
            break;
        }
        out.push(c);
    }
    let mut out = out.trim_end().to_string();
    out.push('…');
    out
}
