//! How each variable's value is read: the parse functions that [`Param`](super::Param)s
//! name, and what they accept.

use super::MAX_TIMEOUT_SECONDS;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::Duration;

pub(super) fn is_blank(v: &OsStr) -> bool {
    v.as_encoded_bytes().iter().all(u8::is_ascii_whitespace)
}

pub(crate) fn utf8(v: &OsStr) -> std::result::Result<&str, String> {
    v.to_str()
        .map(str::trim)
        .ok_or_else(|| "not valid UTF-8".to_string())
}

/// A timeout in seconds: finite, greater than 0 (and at least 1 ns), at
/// most [`MAX_TIMEOUT_SECONDS`]. The check of `--timeout` and
/// `EngineConfig::timeout` too.
pub(crate) fn check_seconds(v: f64) -> std::result::Result<Duration, String> {
    if v.is_nan() {
        return Err("not a number".into());
    }
    if v.is_infinite() {
        return Err("not finite".into());
    }
    if v <= 0.0 {
        return Err("not greater than 0".into());
    }
    if v > MAX_TIMEOUT_SECONDS {
        return Err("out of range: more than 10000000 s".into());
    }
    let d = Duration::from_secs_f64(v);
    if d.is_zero() {
        return Err("shorter than 1 ns".into());
    }
    Ok(d)
}

pub(super) fn parse_seconds(v: &OsStr) -> std::result::Result<Duration, String> {
    let s = utf8(v)?;
    let x: f64 = s.parse().map_err(|_| "not a number".to_string())?;
    check_seconds(x)
}

pub(super) fn parse_bytes(v: &OsStr) -> std::result::Result<u64, String> {
    match crate::size::parse_size(utf8(v)?)? {
        0 => Err("0 bytes".into()),
        b => Ok(b),
    }
}

pub(super) fn parse_positive(v: &OsStr) -> std::result::Result<usize, String> {
    match parse_whole(v)? {
        0 => Err("0 ranks per node make no node".into()),
        n => Ok(n),
    }
}

pub(super) fn parse_queues(v: &OsStr) -> std::result::Result<usize, String> {
    match parse_whole(v)? {
        0 => Err("0 queues run nothing".into()),
        n => Ok(n),
    }
}

pub(super) fn parse_whole(v: &OsStr) -> std::result::Result<usize, String> {
    let s = utf8(v)?;
    s.parse().map_err(|_| {
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            "too large".to_string()
        } else {
            "not a whole number".to_string()
        }
    })
}

pub(super) fn parse_flag(v: &OsStr) -> std::result::Result<bool, String> {
    match utf8(v)? {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("neither 0 nor 1".into()),
    }
}

pub(super) fn parse_cupti_tie(v: &OsStr) -> std::result::Result<super::CuptiTie, String> {
    match utf8(v)? {
        "callback" => Ok(super::CuptiTie::Callback),
        "order" => Ok(super::CuptiTie::Order),
        _ => Err("neither callback nor order".into()),
    }
}

pub(super) fn parse_cupti_kinds(v: &OsStr) -> std::result::Result<super::CuptiKinds, String> {
    match utf8(v)? {
        "all" => Ok(super::CuptiKinds::All),
        "kernel" => Ok(super::CuptiKinds::Kernel),
        "copy" => Ok(super::CuptiKinds::Copy),
        _ => Err("not all, kernel or copy".into()),
    }
}

pub(super) fn parse_devices(v: &OsStr) -> std::result::Result<Vec<usize>, String> {
    utf8(v)?
        .split(',')
        .map(|d| {
            let d = d.trim();
            if d.is_empty() {
                return Err("an empty entry".to_string());
            }
            d.parse::<usize>()
                .map_err(|_| format!("{d:?} is not a GPU ordinal"))
        })
        .collect()
}

pub(super) fn parse_text(v: &OsStr) -> std::result::Result<String, String> {
    utf8(v).map(str::to_string)
}

pub(super) fn parse_path(v: &OsStr) -> std::result::Result<PathBuf, String> {
    Ok(PathBuf::from(v))
}

pub(super) fn parse_faults(v: &OsStr) -> std::result::Result<Vec<crate::fault::EnvFault>, String> {
    crate::fault::parse_env_faults(utf8(v)?)
}

pub(super) const WHOLE: &str = "a whole number (0, 1, 2, ...)";
pub(super) const POSITIVE: &str = "a whole number from 1 (1, 2, 3, ...)";
pub(super) const ANY_TEXT: &str = "any text";
pub(super) const A_PATH: &str = "a path";
