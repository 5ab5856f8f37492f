//! Output files: up-front checks of the paths ([`check_outputs`]) and atomic
//! writes (temporary file in the same directory, then rename).

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::ReportError;

/// The flag of the JSON output, as error messages name it.
pub const JSON_FLAG: &str = "-J/--json";
/// The flag of the CSV output.
pub const CSV_FLAG: &str = "--csv";
/// The flag of the SVG plot.
pub const PLOT_FLAG: &str = "--plot";

/// Checks the output paths before a long benchmark starts, so that a typo
/// fails at once instead of after the run:
///
/// * each path names a file (not an existing directory) whose parent
///   directory exists, is a directory and is writable (a temporary file is
///   created there and deleted);
/// * the paths are pairwise distinct (compared as canonical parent directory
///   plus file name, so `out/a.json` and `./out/../out/a.json` clash);
/// * the plot path ends in `.svg` (the plot is SVG only).
///
/// Errors name the path and its flag (`-J/--json`, `--csv`, `--plot`).
pub fn check_outputs(
    json: Option<&Path>,
    csv: Option<&Path>,
    svg: Option<&Path>,
) -> Result<(), ReportError> {
    if let Some(p) = svg {
        check_svg_extension(p)?;
    }
    let mut seen: Vec<(&'static str, PathBuf)> = Vec::new();
    for (flag, path) in [(JSON_FLAG, json), (CSV_FLAG, csv), (PLOT_FLAG, svg)] {
        let Some(path) = path else { continue };
        let key = check_one(flag, path)?;
        if let Some((first, _)) = seen.iter().find(|(_, k)| *k == key) {
            return Err(ReportError::SamePath {
                first,
                second: flag,
                path: path.to_path_buf(),
            });
        }
        seen.push((flag, key));
    }
    Ok(())
}

/// The same checks as [`check_outputs`] for any commands' outputs: each
/// `(flag, path, svg)` names the flag errors mention, the path if given, and
/// whether it must end in `.svg`.
pub fn check_files(files: &[(&'static str, Option<&Path>, bool)]) -> Result<(), ReportError> {
    for &(flag, path, svg) in files {
        if let (Some(p), true) = (path, svg) {
            let ext = p.extension().and_then(OsStr::to_str);
            if !ext.is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
                return Err(ReportError::NotSvgFile {
                    flag,
                    path: p.to_path_buf(),
                    extension: p.extension().map(|e| e.to_string_lossy().into_owned()),
                });
            }
        }
    }
    let mut seen: Vec<(&'static str, PathBuf)> = Vec::new();
    for &(flag, path, _) in files {
        let Some(path) = path else { continue };
        let key = check_one(flag, path)?;
        if let Some((first, _)) = seen.iter().find(|(_, k)| *k == key) {
            return Err(ReportError::SamePath {
                first,
                second: flag,
                path: path.to_path_buf(),
            });
        }
        seen.push((flag, key));
    }
    Ok(())
}

/// Write `contents` to `path` atomically (see [`check_outputs`]); `_flag`
/// names the output for the caller's messages.
pub fn write_file_atomic(
    _flag: &'static str,
    path: &Path,
    contents: &[u8],
) -> Result<(), ReportError> {
    write_atomic(path, contents)
}

/// `NotSvg` unless `path` ends in `.svg` (any case).
pub(super) fn check_svg_extension(path: &Path) -> Result<(), ReportError> {
    let ext = path.extension().and_then(OsStr::to_str);
    if ext.is_some_and(|e| e.eq_ignore_ascii_case("svg")) {
        return Ok(());
    }
    Err(ReportError::NotSvg {
        path: path.to_path_buf(),
        extension: path.extension().map(|e| e.to_string_lossy().into_owned()),
    })
}

/// The directory a file at `path` lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Checks one output path; returns its canonical parent joined with its file
/// name, the key the distinctness check compares.
fn check_one(flag: &'static str, path: &Path) -> Result<PathBuf, ReportError> {
    let not_a_file = || ReportError::NotAFile {
        flag,
        path: path.to_path_buf(),
    };
    let Some(name) = path.file_name() else {
        return Err(not_a_file());
    };
    let dir = parent_dir(path);
    let meta = fs::metadata(dir).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            ReportError::NoSuchDir {
                flag,
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
            }
        } else {
            ReportError::NotWritable {
                flag,
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
                source,
            }
        }
    })?;
    if !meta.is_dir() {
        return Err(ReportError::NotADir {
            flag,
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        });
    }
    if path.is_dir() {
        return Err(not_a_file());
    }
    let not_writable = |source| ReportError::NotWritable {
        flag,
        path: path.to_path_buf(),
        dir: dir.to_path_buf(),
        source,
    };
    let (file, probe) = create_temp(dir, name).map_err(not_writable)?;
    drop(file);
    fs::remove_file(&probe).map_err(not_writable)?;
    let canonical = fs::canonicalize(dir).map_err(not_writable)?;
    Ok(canonical.join(name))
}

/// Creates a new, empty temporary file next to where `name` goes in `dir`:
/// `.<name>.<pid>.<n>.tmp`, never an existing file.
fn create_temp(dir: &Path, name: &OsStr) -> io::Result<(fs::File, PathBuf)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name");
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(
            ".{}.{}.{n}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Writes `contents` to `path` atomically: into a temporary file in the same
/// directory, flushed to disk, then renamed over `path`. On any error the
/// temporary file is removed and `path` is left as it was.
pub(super) fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let Some(name) = path.file_name() else {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path has no file name",
        )));
    };
    let (mut file, tmp) = create_temp(parent_dir(path), name).map_err(err)?;
    let written = file
        .write_all(contents)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            fs::rename(&tmp, path)
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(err(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::temp_path;
    use super::*;

    /// A fresh, empty directory for one test.
    fn temp_dir(name: &str) -> PathBuf {
        let d = temp_path(name);
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn good_outputs_pass_and_leave_nothing() {
        let d = temp_dir("check_ok");
        let (j, c, s) = (d.join("r.json"), d.join("r.csv"), d.join("r.SVG"));
        check_outputs(Some(&j), Some(&c), Some(&s)).unwrap();
        check_outputs(None, None, None).unwrap();
        check_outputs(Some(&j), None, None).unwrap();
        assert!(entries(&d).is_empty(), "{:?}", entries(&d));
        // An existing file is fine: it will be replaced.
        fs::write(&j, "old").unwrap();
        check_outputs(Some(&j), None, None).unwrap();
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn bare_file_name_uses_the_current_directory() {
        assert_eq!(parent_dir(Path::new("x.json")), Path::new("."));
        assert_eq!(parent_dir(Path::new("a/x.json")), Path::new("a"));
    }

    #[test]
    fn missing_dir_names_flag_and_path() {
        let d = temp_dir("check_missing");
        let p = d.join("nope").join("r.csv");
        let e = check_outputs(None, Some(&p), None).unwrap_err();
        assert!(
            matches!(e, ReportError::NoSuchDir { flag: "--csv", .. }),
            "{e}"
        );
        let s = e.to_string();
        assert!(s.starts_with("--csv ") && s.contains("nope") && s.contains("does not exist"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn parent_not_a_dir() {
        let d = temp_dir("check_notdir");
        let f = d.join("file");
        fs::write(&f, "x").unwrap();
        let e = check_outputs(Some(&f.join("r.json")), None, None).unwrap_err();
        assert!(
            matches!(
                e,
                ReportError::NotADir {
                    flag: JSON_FLAG,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("-J/--json") && e.to_string().contains("not a directory"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn directory_is_not_a_file() {
        let d = temp_dir("check_isdir");
        let e = check_outputs(Some(&d), None, None).unwrap_err();
        assert!(matches!(e, ReportError::NotAFile { .. }), "{e}");
        let e = check_outputs(None, Some(Path::new("..")), None).unwrap_err();
        assert!(
            matches!(e, ReportError::NotAFile { flag: CSV_FLAG, .. }),
            "{e}"
        );
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn same_path_twice() {
        let d = temp_dir("check_same");
        fs::create_dir_all(d.join("sub")).unwrap();
        let a = d.join("out.svg");
        let b = d.join("sub").join("..").join("out.svg");
        let e = check_outputs(Some(&a), None, Some(&b)).unwrap_err();
        assert!(
            matches!(
                e,
                ReportError::SamePath {
                    first: JSON_FLAG,
                    second: PLOT_FLAG,
                    ..
                }
            ),
            "{e}"
        );
        let e = check_outputs(None, Some(&a), Some(&a)).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("--csv and --plot both name the file"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn plot_must_be_svg() {
        let d = temp_dir("check_png");
        let e = check_outputs(None, None, Some(&d.join("plot.png"))).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, ReportError::NotSvg { .. }));
        assert!(s.starts_with("--plot ") && s.contains("plot.png"), "{s}");
        assert!(
            s.contains("SVG only") && s.contains(".png is not supported"),
            "{s}"
        );
        let e = check_outputs(None, None, Some(&d.join("plot"))).unwrap_err();
        assert!(
            matches!(
                e,
                ReportError::NotSvg {
                    extension: None,
                    ..
                }
            ),
            "{e}"
        );
        let _ = fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn read_only_dir_is_not_writable() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = temp_dir("check_ro");
        let ro = d.join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
        // Root may write anyway; then there is nothing to test.
        let root_writes = fs::write(ro.join("probe"), "x").is_ok();
        let r = check_outputs(None, Some(&ro.join("r.csv")), None);
        if root_writes {
            let _ = fs::remove_file(ro.join("probe"));
            assert!(r.is_ok());
        } else {
            let e = r.unwrap_err();
            assert!(matches!(e, ReportError::NotWritable { .. }), "{e}");
            assert!(e.to_string().contains("cannot create a file"));
        }
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn any_flags() {
        let d = temp_dir("check_files");
        let (j, s) = (d.join("t.json"), d.join("t.svg"));
        check_files(&[("--timeline", Some(&j), false), ("--svg", Some(&s), true)]).unwrap();
        check_files(&[("--timeline", None, false), ("--svg", None, true)]).unwrap();
        let e = check_files(&[("--svg", Some(&d.join("t.png")), true)]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("--svg ") && m.contains("SVG only") && m.contains(".png"),
            "{m}"
        );
        let e =
            check_files(&[("--timeline", Some(&s), false), ("--svg", Some(&s), true)]).unwrap_err();
        assert!(
            e.to_string().starts_with("--timeline and --svg both name"),
            "{e}"
        );
        let e =
            check_files(&[("--timeline", Some(&d.join("no").join("x.json")), false)]).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(entries(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn atomic_write_replaces_and_cleans_up() {
        let d = temp_dir("atomic");
        let p = d.join("out.txt");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "second");
        assert_eq!(entries(&d), ["out.txt"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_write_leaves_no_file() {
        let d = temp_dir("atomic_fail");
        // The target is a non-empty directory: the rename fails.
        let target = d.join("busy");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "k").unwrap();
        let e = write_atomic(&target, b"data").unwrap_err();
        assert!(matches!(e, ReportError::Write { .. }), "{e}");
        assert_eq!(entries(&d), ["busy"]);
        assert_eq!(entries(&target), ["keep"]);
        // A missing directory: nothing is created.
        let e = write_atomic(&d.join("no").join("x.json"), b"{}").unwrap_err();
        assert!(e.to_string().starts_with("writing "), "{e}");
        assert_eq!(entries(&d), ["busy"]);
        let _ = fs::remove_dir_all(&d);
    }
}
