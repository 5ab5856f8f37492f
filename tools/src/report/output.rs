//! Output files: the one way every command writes a file a user names
//! (`bench -J/--csv/--plot`, `trace --timeline/--svg`, `compare --plot`,
//! `overlap --json/--timeline`). [`check_files`] checks them all before the
//! run; [`write_output`] writes one.
//!
//! How a path is written: [`write_output`]; what is checked:
//! [`check_files`].

use std::ffi::OsStr;
use std::fs::{self, Metadata, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::ReportError;

/// The flag of the JSON output, as error messages name it.
pub const JSON_FLAG: &str = "-J/--json";
/// The flag of the CSV output.
pub const CSV_FLAG: &str = "--csv";
/// The flag of the SVG plot.
pub const PLOT_FLAG: &str = "--plot";

/// The most symbolic links followed in one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What an output holds, which fixes the extension its path must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON: `-J/--json`, `trace --timeline` (Chrome trace events),
    /// `overlap --json` and `--timeline`.
    Json,
    /// CSV: `--csv`.
    Csv,
    /// SVG: `--plot`, `trace --svg`.
    Svg,
}

impl Format {
    /// The extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Svg => "svg",
        }
    }
}

/// Checks `bench`'s three outputs ([`check_files`] with `-J/--json` as
/// JSON, `--csv` as CSV and `--plot` as SVG).
pub fn check_outputs(
    json: Option<&Path>,
    csv: Option<&Path>,
    svg: Option<&Path>,
) -> Result<(), ReportError> {
    check_files(&[
        (JSON_FLAG, json, Format::Json),
        (CSV_FLAG, csv, Format::Csv),
        (PLOT_FLAG, svg, Format::Svg),
    ])
}

/// Checks a command's output paths before it runs, so that a typo fails at
/// once instead of after a long benchmark: each `(flag, path, format)` names
/// the flag errors mention, the path if given, and what it holds. What is
/// checked, in order (how each kind of path is written: [`write_output`]):
///
/// 1. Each path has a file name (not `..`, not ending in `/`) and does not
///    resolve to a directory. A file to be replaced or created: its
///    directory (after resolving links) exists, is a directory, and a file
///    can be created in it (a temporary file is created and removed). A file
///    written in place or through: this process may write it (`faccessat`;
///    nothing is opened, so a FIFO does not block and a device sees
///    nothing).
/// 2. No two outputs are the same file: after resolving links, the same
///    (`st_dev`, `st_ino`) for existing files (so a symlink or a hard link
///    to another output clashes), the same canonical directory and name for
///    files not there yet. Outputs written through to a device, FIFO, socket
///    or descriptor are streams and may be shared (`-J /dev/null --csv
///    /dev/null`).
/// 3. Each path ends in the extension of what its flag writes ([`Format`]:
///    `.json`, `.csv`, `.svg`, any case); through a symlink, the name of the
///    link's final target may carry it instead. Outputs written through
///    (`-J /dev/stdout`, a FIFO) are exempt.
///
/// Any path given but this process's own stdout (`-J /dev/stdout`) also
/// tells the command line that files are pending
/// ([`crate::cli::expect_files`]): a closed stdout then makes the command
/// quiet instead of ending it before they are written.
///
/// Errors name the flag and the path. The state can change between the check
/// and the write; [`write_output`] resolves the path again.
pub fn check_files(files: &[(&'static str, Option<&Path>, Format)]) -> Result<(), ReportError> {
    let mut checked = Vec::new();
    for &(flag, path, format) in files {
        let Some(path) = path else { continue };
        let (target, key) = check_one(flag, path)?;
        // A closed stdout must not end the command before this is written
        // (unless this is that stdout: nobody reads it any more).
        if !matches!(
            target,
            Target::Through {
                stream: Stream::Stdout,
                ..
            }
        ) {
            crate::cli::expect_files();
        }
        checked.push((flag, path, format, target, key));
    }
    for (i, (second, path, _, t2, k2)) in checked.iter().enumerate() {
        let Some(k2) = k2 else { continue };
        for (first, _, _, t1, k1) in &checked[..i] {
            if k1.as_ref() == Some(k2) && !(t1.is_through() && t2.is_through()) {
                return Err(ReportError::SamePath {
                    first,
                    second,
                    path: path.to_path_buf(),
                });
            }
        }
    }
    for (flag, path, format, target, _) in &checked {
        extension_ok(flag, path, *format, target)?;
    }
    Ok(())
}

/// Writes `contents` to the output `path` of `flag` (the flag names it in
/// errors): replaced atomically, written in place or written through,
/// depending on what `path` resolves to.
///
/// The path is resolved first: a chain of symbolic links is followed to its
/// end (at most 40 links), and what is there decides:
///
/// * **Nothing yet** (a new file, or a dangling link whose target's directory
///   exists) or **a regular file with one link**: replaced atomically. The
///   contents go into a temporary file `.rr-<pid>-<n>.tmp` in the file's
///   directory (a name of fixed length, so a file name of any valid length,
///   up to 255 bytes, works), are flushed to disk, get the old file's
///   permission bits (and owner, where the process may set it), and the
///   temporary file is renamed onto the file. A failure removes the
///   temporary file and leaves the file as it was. Through a symlink, the
///   link's final target is replaced (or created) and the link stays a link.
/// * **A regular file with several hard links**: written in place
///   (truncated, written, flushed), so it keeps its inode and every name of
///   it sees the new contents. This is not atomic: a failure mid-write (a
///   full disk) can leave it short, and the error says so. Why not refuse:
///   links are made on purpose (a results file also linked into another
///   directory), and a shell redirection (`> file`) writes them in place
///   too. Why not replace: the file would silently split in two, its other
///   names keeping the old contents.
/// * **Anything else that exists** (a character or block device such as
///   `/dev/null`, a FIFO, a socket) and **an open descriptor**
///   (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/<pid>/fd/N`, whatever
///   it points to): written through. It is opened for writing, never
///   created, truncated or renamed over. This process's own `/dev/stdout`
///   and `/dev/stderr` are written through its stdout and stderr, at their
///   current position (so `bench -J /dev/stdout > all.txt` puts the JSON
///   after the text report instead of over it); another descriptor of a
///   regular file is opened for appending. A FIFO blocks until a reader
///   opens it, as a shell redirection does.
///
/// Nothing but a regular file (or a temporary file of this module) is ever
/// renamed over. A directory, or a link to one, is refused.
pub fn write_output(flag: &'static str, path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    let err = |what: String, source| ReportError::Write {
        flag,
        path: path.to_path_buf(),
        what,
        source,
    };
    match resolve(path).map_err(|e| err("cannot resolve the path".into(), e))? {
        Target::Replace { file, old } => replace(&file, old.as_ref(), contents).map_err(|e| {
            let left = if old.is_some() {
                "the file is left as it was"
            } else {
                "no file was left"
            };
            err(format!("writing failed, {left}"), e)
        }),
        Target::InPlace { file, links } => in_place(&file, contents).map_err(|e| {
            err(
                format!(
                    "writing in place failed (the file has {links} hard links, so it is written \
                     in place, not replaced); it may be incomplete"
                ),
                e,
            )
        }),
        Target::Through { kind, stream, .. } => through(path, stream, contents)
            .map_err(|e| err(format!("writing to this {kind} failed"), e)),
    }
}

/// Whether [`write_output`] would write `path` through (a device, FIFO,
/// socket or open descriptor) rather than create or replace a file; `false`
/// when it cannot tell (the write will say why).
pub fn is_written_through(path: &Path) -> bool {
    resolve(path).is_ok_and(|t| t.is_through())
}

/// `WrongExtension` unless `path` may hold `format` (see [`check_files`],
/// step 3); for [`Report::write_svg`](super::Report::write_svg).
pub(super) fn check_extension(
    flag: &'static str,
    path: &Path,
    format: Format,
) -> Result<(), ReportError> {
    match resolve(path) {
        Ok(target) => extension_ok(flag, path, format, &target),
        // The write will say what is wrong with the path; judge its name.
        Err(_) => extension_ok(
            flag,
            path,
            format,
            &Target::Replace {
                file: path.to_path_buf(),
                old: None,
            },
        ),
    }
}

/// What an output path resolves to, and so how it is written.
#[derive(Debug)]
enum Target {
    /// Not there yet, or a regular file with one link: a temporary file in
    /// `file`'s directory is renamed onto `file` (the end of the link chain).
    Replace {
        file: PathBuf,
        /// The file being replaced, if any.
        old: Option<Metadata>,
    },
    /// A regular file with `links` > 1 hard links: written in place.
    InPlace { file: PathBuf, links: u64 },
    /// A device, FIFO, socket or open descriptor: opened and written.
    Through {
        /// What it is, for messages.
        kind: &'static str,
        stream: Stream,
        /// The regular file behind an open descriptor, if it is one.
        file: Option<Metadata>,
    },
}

impl Target {
    fn is_through(&self) -> bool {
        matches!(self, Target::Through { .. })
    }

    /// The path at the end of the link chain, for a file written by name.
    fn file(&self) -> Option<&Path> {
        match self {
            Target::Replace { file, .. } | Target::InPlace { file, .. } => Some(file),
            Target::Through { .. } => None,
        }
    }
}

/// How a written-through output is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// This process's standard output.
    Stdout,
    /// This process's standard error.
    Stderr,
    /// Opened by its path for writing (appending: a regular file behind a
    /// descriptor).
    Open { append: bool },
}

/// Identity of an output for the same-file check.
#[derive(Debug, PartialEq, Eq)]
enum Key {
    /// An existing file: (`st_dev`, `st_ino`).
    Inode(u64, u64),
    /// A file not there yet: canonical directory joined with its name.
    Name(PathBuf),
}

/// The directory a file at `path` lives in (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Follows `path`'s chain of symbolic links to its end and says how an
/// output there is written. A missing end is [`Target::Replace`] without an
/// old file (its directory is checked by the caller). Errors: a directory
/// (`IsADirectory`), a link loop (`ELOOP`), and whatever `lstat` says.
fn resolve(path: &Path) -> io::Result<Target> {
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Target::Replace { file: p, old: None })
            }
            Err(e) => return Err(e),
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            if let Some(stream) = descriptor(&p) {
                // The kernel follows /proc's descriptor links to the open
                // file itself, even a deleted one or a pipe.
                let end = fs::metadata(&p)?;
                let (stream, file) = match stream {
                    Stream::Open { .. } if end.is_file() => {
                        (Stream::Open { append: true }, Some(end))
                    }
                    s => (s, end.is_file().then_some(end)),
                };
                return Ok(Target::Through {
                    kind: "open descriptor",
                    stream,
                    file,
                });
            }
            let to = fs::read_link(&p)?;
            // An absolute `to` replaces the directory; a relative one is
            // resolved (by the kernel, physically) from the link's directory.
            p = parent_dir(&p).join(to);
            continue;
        }
        if ft.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "names a directory",
            ));
        }
        if ft.is_file() {
            if meta.nlink() > 1 {
                return Ok(Target::InPlace {
                    file: p,
                    links: meta.nlink(),
                });
            }
            return Ok(Target::Replace {
                file: p,
                old: Some(meta),
            });
        }
        let kind = if ft.is_char_device() {
            "character device"
        } else if ft.is_block_device() {
            "block device"
        } else if ft.is_fifo() {
            "FIFO"
        } else if ft.is_socket() {
            "socket"
        } else {
            "special file"
        };
        return Ok(Target::Through {
            kind,
            stream: Stream::Open { append: false },
            file: None,
        });
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// If the link `p` is an open descriptor (its directory is `/proc/<pid>/fd`
/// or `/proc/<pid>/task/<tid>/fd`; `/dev/stdout`, `/dev/fd/N` and
/// `/proc/self/fd/N` lead there), how to write it: this process's fd 1 and 2
/// through its stdout and stderr, anything else by opening it.
fn descriptor(p: &Path) -> Option<Stream> {
    let dir = fs::canonicalize(parent_dir(p)).ok()?;
    let parts: Vec<&OsStr> = dir
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let pid = match parts.as_slice() {
        [proc, pid, fd] | [proc, pid, _, _, fd]
            if *proc == "proc" && *fd == "fd" && (parts.len() == 3 || parts[2] == "task") =>
        {
            *pid
        }
        _ => return None,
    };
    let own = pid.to_str() == Some(&std::process::id().to_string());
    Some(match p.file_name().and_then(OsStr::to_str) {
        Some("1") if own => Stream::Stdout,
        Some("2") if own => Stream::Stderr,
        _ => Stream::Open { append: false },
    })
}

/// Checks one output path (step 1 of [`check_files`]); returns what it
/// resolves to and its identity for the same-file check (`None`: a stream
/// that is not a regular file).
fn check_one(flag: &'static str, path: &Path) -> Result<(Target, Option<Key>), ReportError> {
    let not_a_file = || ReportError::NotAFile {
        flag,
        path: path.to_path_buf(),
    };
    // `..`, `/`, or a name ending in `/` (which only a directory can have).
    if path.file_name().is_none() || path.as_os_str().as_bytes().ends_with(b"/") {
        return Err(not_a_file());
    }
    let target = resolve(path).map_err(|source| match source.kind() {
        io::ErrorKind::IsADirectory => not_a_file(),
        io::ErrorKind::NotADirectory => ReportError::NotADir {
            flag,
            path: path.to_path_buf(),
            dir: parent_dir(path).to_path_buf(),
        },
        _ => ReportError::BadPath {
            flag,
            path: path.to_path_buf(),
            source,
        },
    })?;
    let cannot_write = |what: &'static str, source| ReportError::CannotWrite {
        flag,
        path: path.to_path_buf(),
        what,
        source,
    };
    let key = match &target {
        Target::Replace { file, old } => {
            let Some(name) = file.file_name() else {
                return Err(not_a_file());
            };
            let dir = parent_dir(file);
            let not_writable = |source| ReportError::NotWritable {
                flag,
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
                source,
            };
            let meta = fs::metadata(dir).map_err(|source| {
                if source.kind() == io::ErrorKind::NotFound {
                    ReportError::NoSuchDir {
                        flag,
                        path: path.to_path_buf(),
                        dir: dir.to_path_buf(),
                    }
                } else {
                    not_writable(source)
                }
            })?;
            if !meta.is_dir() {
                return Err(ReportError::NotADir {
                    flag,
                    path: path.to_path_buf(),
                    dir: dir.to_path_buf(),
                });
            }
            let (probe, probe_path) = create_temp(dir).map_err(not_writable)?;
            drop(probe);
            fs::remove_file(&probe_path).map_err(not_writable)?;
            Some(match old {
                Some(m) => Key::Inode(m.dev(), m.ino()),
                None => Key::Name(fs::canonicalize(dir).map_err(not_writable)?.join(name)),
            })
        }
        Target::InPlace { file, .. } => {
            ringreduce::os::check_writable(file).map_err(|e| cannot_write("file", e))?;
            let m = fs::metadata(file).map_err(|e| cannot_write("file", e))?;
            Some(Key::Inode(m.dev(), m.ino()))
        }
        Target::Through { kind, file, .. } => {
            ringreduce::os::check_writable(path).map_err(|e| cannot_write(kind, e))?;
            file.as_ref().map(|m| Key::Inode(m.dev(), m.ino()))
        }
    };
    Ok((target, key))
}

/// Step 3 of [`check_files`] for one output.
fn extension_ok(
    flag: &'static str,
    path: &Path,
    format: Format,
    target: &Target,
) -> Result<(), ReportError> {
    let want = format.extension();
    let has = |p: &Path| {
        p.extension()
            .and_then(OsStr::to_str)
            .is_some_and(|e| e.eq_ignore_ascii_case(want))
    };
    if target.is_through() || has(path) || target.file().is_some_and(has) {
        return Ok(());
    }
    Err(ReportError::WrongExtension {
        flag,
        path: path.to_path_buf(),
        found: path.extension().map(|e| e.to_string_lossy().into_owned()),
        expected: want,
    })
}

/// Creates a new, empty temporary file in `dir`: `.rr-<pid>-<n>.tmp`, a
/// name of fixed length (whatever the length of the file it will replace),
/// never an existing file.
fn create_temp(dir: &Path) -> io::Result<(fs::File, PathBuf)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name");
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".rr-{}-{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Writes `contents` into a temporary file next to `file`, flushed, with
/// `old`'s permission bits and (best effort) owner, then renames it onto
/// `file`. On any error the temporary file is removed and `file` is left
/// as it was.
fn replace(file: &Path, old: Option<&Metadata>, contents: &[u8]) -> io::Result<()> {
    let (mut f, tmp) = create_temp(parent_dir(file))?;
    let mut written = || -> io::Result<()> {
        if let Some(m) = old {
            // Keeps a root-run benchmark from taking a user's file; where
            // the process may not give it away, the file becomes its own,
            // as any new file does.
            let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
            f.set_permissions(fs::Permissions::from_mode(m.mode() & 0o777))?;
        }
        f.write_all(contents)?;
        f.sync_all()
    };
    let r = written().and_then(|()| {
        drop(f);
        fs::rename(&tmp, file)
    });
    if r.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    r
}

/// Truncates the (hard-linked) regular `file`, writes `contents` and
/// flushes it: not atomic (see [`write_output`]).
fn in_place(file: &Path, contents: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).truncate(true).open(file)?;
    f.write_all(contents)?;
    f.sync_all()
}

/// Writes `contents` to a device, FIFO, socket or descriptor: no create, no
/// truncate, no rename.
fn through(path: &Path, stream: Stream, contents: &[u8]) -> io::Result<()> {
    match stream {
        // A closed stdout or stderr (`-J /dev/stdout | head -1`): nobody
        // reads it any more, so there is nothing to write, as for the text
        // report (see `crate::cli::Out`).
        Stream::Stdout => crate::cli::write_stdout(contents),
        Stream::Stderr => {
            let mut e = io::stderr().lock();
            match e.write_all(contents).and_then(|()| e.flush()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                r => r,
            }
        }
        Stream::Open { append } => OpenOptions::new()
            .write(true)
            .append(append)
            .open(path)?
            .write_all(contents),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::temp_path;
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::mpsc;
    use std::time::Duration;

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

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", p.display());
    }

    /// Opens the FIFO `p` for reading without blocking: a writer then finds
    /// a reader, and small contents wait in the pipe's buffer. (A blocking
    /// reader would hang the test if the FIFO were replaced instead.)
    fn fifo_reader(p: &Path) -> fs::File {
        use std::os::unix::fs::OpenOptionsExt as _;
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p)
            .unwrap()
    }

    /// What is waiting in the FIFO.
    fn drain_fifo(mut f: fs::File) -> Vec<u8> {
        use std::io::Read as _;
        let mut v = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = f.read(&mut buf) {
            v.extend_from_slice(&buf[..n]);
        }
        v
    }

    /// Runs `f` on another thread and fails (instead of hanging) if it
    /// takes more than 10 s: the checks must never open a FIFO.
    fn within_10s<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("blocked: the check opened a FIFO")
    }

    fn assert_dev_null_intact() {
        let m = fs::symlink_metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device(), "/dev/null: {m:?}");
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
        let e = check_outputs(None, Some(&d.join("new.csv/")), None).unwrap_err();
        assert!(matches!(e, ReportError::NotAFile { .. }), "{e}");
        // A link to a directory is refused too, and nothing is replaced.
        fs::create_dir(d.join("sub")).unwrap();
        symlink("sub", d.join("to-sub.json")).unwrap();
        let e = check_outputs(Some(&d.join("to-sub.json")), None, None).unwrap_err();
        assert!(matches!(e, ReportError::NotAFile { .. }), "{e}");
        assert!(write_output(JSON_FLAG, &d.join("to-sub.json"), b"{}").is_err());
        assert!(fs::symlink_metadata(d.join("to-sub.json"))
            .unwrap()
            .file_type()
            .is_symlink());
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

    /// Regression (issue 25): the same-file check compared names only, so
    /// a symlink or a hard link to another output passed.
    #[test]
    fn same_file_through_symlink_or_hard_link_is_refused() {
        let d = temp_dir("check_same_links");
        let real = d.join("real.json");
        fs::write(&real, "old").unwrap();
        let link = d.join("link.csv");
        symlink("real.json", &link).unwrap();
        let e = check_outputs(Some(&real), Some(&link), None).unwrap_err();
        assert!(
            matches!(
                e,
                ReportError::SamePath {
                    first: JSON_FLAG,
                    second: CSV_FLAG,
                    ..
                }
            ),
            "{e}"
        );
        let hard = d.join("hard.csv");
        fs::hard_link(&real, &hard).unwrap();
        let e = check_outputs(Some(&real), Some(&hard), None).unwrap_err();
        assert!(matches!(e, ReportError::SamePath { .. }), "{e}");
        // A dangling link and the file it will create.
        let new = d.join("new.json");
        symlink("new.json", d.join("new-link.csv")).unwrap();
        let e = check_outputs(Some(&new), Some(&d.join("new-link.csv")), None).unwrap_err();
        assert!(matches!(e, ReportError::SamePath { .. }), "{e}");
        // Streams may be shared: both to /dev/null.
        check_outputs(
            Some(Path::new("/dev/null")),
            Some(Path::new("/dev/null")),
            None,
        )
        .unwrap();
        assert_eq!(
            entries(&d),
            ["hard.csv", "link.csv", "new-link.csv", "real.json"]
        );
        let _ = fs::remove_dir_all(&d);
    }

    /// Regression (issue 25): only the plot's extension was checked.
    #[test]
    fn wrong_extension_per_flag_is_refused() {
        let d = temp_dir("check_ext");
        for (flag, name, format, found, expected) in [
            (JSON_FLAG, "o.csv", Format::Json, Some("csv"), "json"),
            (CSV_FLAG, "o.json", Format::Csv, Some("json"), "csv"),
            ("--timeline", "x.csv", Format::Json, Some("csv"), "json"),
            (PLOT_FLAG, "plot.png", Format::Svg, Some("png"), "svg"),
            ("--svg", "picture", Format::Svg, None, "svg"),
        ] {
            let p = d.join(name);
            let e = check_files(&[(flag, Some(&p), format)]).unwrap_err();
            match &e {
                ReportError::WrongExtension {
                    flag: f,
                    found: x,
                    expected: w,
                    ..
                } => {
                    assert_eq!((*f, x.as_deref(), *w), (flag, found, expected), "{e}")
                }
                _ => panic!("{name}: {e}"),
            }
            let m = e.to_string();
            assert!(m.starts_with(&format!("{flag} ")), "{m}");
            assert!(
                m.contains(name) && m.contains(&format!(".{expected}")),
                "{m}"
            );
            if let Some(x) = found {
                assert!(m.contains(&format!("ends in .{x}")), "{m}");
            } else {
                assert!(m.contains("has no extension"), "{m}");
            }
        }
        // Any case; and a link's target may carry the extension.
        check_files(&[(CSV_FLAG, Some(&d.join("o.CSV")), Format::Csv)]).unwrap();
        fs::write(d.join("r.json"), "").unwrap();
        symlink("r.json", d.join("latest")).unwrap();
        check_files(&[(JSON_FLAG, Some(&d.join("latest")), Format::Json)]).unwrap();
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn special_files_are_exempt_from_the_extension() {
        for format in [Format::Json, Format::Csv, Format::Svg] {
            check_files(&[("--x", Some(Path::new("/dev/null")), format)]).unwrap();
            check_files(&[("--x", Some(Path::new("/dev/stdout")), format)]).unwrap();
        }
        let d = temp_dir("check_fifo_ext");
        let fifo = d.join("fifo");
        mkfifo(&fifo);
        // No reader: the check must not open it (that would block).
        let f = fifo.clone();
        within_10s(move || check_files(&[(JSON_FLAG, Some(&f), Format::Json)])).unwrap();
        let _ = fs::remove_dir_all(&d);
        assert_dev_null_intact();
    }

    #[test]
    fn any_flags() {
        let d = temp_dir("check_files");
        let (j, s) = (d.join("t.json"), d.join("t.svg"));
        check_files(&[
            ("--timeline", Some(&j), Format::Json),
            ("--svg", Some(&s), Format::Svg),
        ])
        .unwrap();
        check_files(&[
            ("--timeline", None, Format::Json),
            ("--svg", None, Format::Svg),
        ])
        .unwrap();
        let e = check_files(&[("--svg", Some(&d.join("t.png")), Format::Svg)]).unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("--svg ") && m.contains("SVG") && m.contains(".png"),
            "{m}"
        );
        let e = check_files(&[
            ("--timeline", Some(&s), Format::Json),
            ("--svg", Some(&s), Format::Svg),
        ])
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--timeline and --svg both name"),
            "{e}"
        );
        let e = check_files(&[(
            "--timeline",
            Some(&d.join("no").join("x.json")),
            Format::Json,
        )])
        .unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(entries(&d).is_empty());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn read_only_dir_is_not_writable() {
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
    fn link_loop_is_an_error() {
        let d = temp_dir("check_loop");
        symlink("b.json", d.join("a.json")).unwrap();
        symlink("a.json", d.join("b.json")).unwrap();
        let e = check_outputs(Some(&d.join("a.json")), None, None).unwrap_err();
        assert!(matches!(e, ReportError::BadPath { .. }), "{e}");
        assert!(e.to_string().contains("symbolic links"), "{e}");
        assert!(write_output(JSON_FLAG, &d.join("a.json"), b"{}").is_err());
        assert_eq!(entries(&d), ["a.json", "b.json"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn atomic_write_replaces_and_cleans_up() {
        let d = temp_dir("atomic");
        let p = d.join("out.txt");
        write_output("--x", &p, b"first").unwrap();
        let ino = fs::metadata(&p).unwrap().ino();
        write_output("--x", &p, b"second").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "second");
        assert_ne!(
            fs::metadata(&p).unwrap().ino(),
            ino,
            "replaced, not rewritten"
        );
        assert_eq!(entries(&d), ["out.txt"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn replacing_keeps_the_permission_bits() {
        let d = temp_dir("atomic_mode");
        let p = d.join("out.json");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write_output(JSON_FLAG, &p, b"new").unwrap();
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o640);
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn failed_write_leaves_no_file() {
        let d = temp_dir("atomic_fail");
        // The target is a non-empty directory: refused.
        let target = d.join("busy");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), "k").unwrap();
        let e = write_output("--x", &target, b"data").unwrap_err();
        assert!(matches!(e, ReportError::Write { .. }), "{e}");
        assert_eq!(entries(&d), ["busy"]);
        assert_eq!(entries(&target), ["keep"]);
        // A missing directory: nothing is created.
        let e = write_output("--x", &d.join("no").join("x.json"), b"{}").unwrap_err();
        assert!(e.to_string().starts_with("--x "), "{e}");
        assert!(e.to_string().contains("no file was left"), "{e}");
        assert_eq!(entries(&d), ["busy"]);
        let _ = fs::remove_dir_all(&d);
    }

    /// Regression (issue 25): as root, `-J /dev/null` replaced the device
    /// node with a regular file.
    #[test]
    fn device_is_written_through() {
        check_outputs(Some(Path::new("/dev/null")), None, None).unwrap();
        assert!(is_written_through(Path::new("/dev/null")));
        write_output(JSON_FLAG, Path::new("/dev/null"), b"{}\n").unwrap();
        assert_dev_null_intact();
        // Through a link: the link stays, the device stays.
        let d = temp_dir("through_dev");
        let link = d.join("sink.json");
        symlink("/dev/null", &link).unwrap();
        check_outputs(Some(&link), None, None).unwrap();
        write_output(JSON_FLAG, &link, b"{}\n").unwrap();
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("/dev/null"));
        assert_eq!(entries(&d), ["sink.json"]);
        assert_dev_null_intact();
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn fifo_is_written_through() {
        let d = temp_dir("through_fifo");
        let fifo = d.join("pipe");
        mkfifo(&fifo);
        let reader = fifo_reader(&fifo);
        let f = fifo.clone();
        within_10s(move || write_output(CSV_FLAG, &f, b"a,b\n1,2\n")).unwrap();
        assert_eq!(drain_fifo(reader), b"a,b\n1,2\n");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(entries(&d), ["pipe"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn descriptors_are_written_through() {
        // This process's stdout and stderr, by every usual name.
        for (p, s) in [
            ("/dev/stdout", Stream::Stdout),
            ("/dev/stderr", Stream::Stderr),
            ("/dev/fd/1", Stream::Stdout),
            ("/proc/self/fd/2", Stream::Stderr),
        ] {
            match resolve(Path::new(p)) {
                Ok(Target::Through { stream, .. }) => assert_eq!(stream, s, "{p}"),
                t => panic!("{p}: {t:?}"),
            }
        }
        // Another descriptor of a regular file: appended to, never replaced.
        let d = temp_dir("through_fd");
        let p = d.join("log.txt");
        fs::write(&p, "text report\n").unwrap();
        let ino = fs::metadata(&p).unwrap().ino();
        let held = OpenOptions::new().append(true).open(&p).unwrap();
        let fd_path = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&held)
        ));
        check_files(&[(JSON_FLAG, Some(&fd_path), Format::Json)]).unwrap();
        write_output(JSON_FLAG, &fd_path, b"{}\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "text report\n{}\n");
        assert_eq!(fs::metadata(&p).unwrap().ino(), ino);
        // It is the same file as the one it points to.
        let e = check_files(&[
            (JSON_FLAG, Some(&fd_path), Format::Json),
            ("--txt", Some(&p), Format::Json),
        ]);
        assert!(matches!(e, Err(ReportError::SamePath { .. })), "{e:?}");
        drop(held);
        assert_eq!(entries(&d), ["log.txt"]);
        let _ = fs::remove_dir_all(&d);
    }

    /// Regression (issue 25): a symlink became a regular file and its
    /// target was left as it was.
    #[test]
    fn symlink_is_followed_and_kept() {
        let d = temp_dir("through_link");
        fs::create_dir(d.join("runs")).unwrap();
        let real = d.join("runs").join("real.json");
        fs::write(&real, "old").unwrap();
        let link = d.join("link.json");
        symlink("runs/real.json", &link).unwrap();
        // A chain: link2 -> link.json -> runs/real.json.
        let link2 = d.join("link2.json");
        symlink(&link, &link2).unwrap();
        for (l, text) in [(&link, "first"), (&link2, "second")] {
            check_outputs(Some(l), None, None).unwrap();
            assert!(!is_written_through(l));
            write_output(JSON_FLAG, l, text.as_bytes()).unwrap();
            assert_eq!(fs::read_to_string(&real).unwrap(), text);
            assert_eq!(fs::read_link(&link).unwrap(), Path::new("runs/real.json"));
            assert_eq!(fs::read_link(&link2).unwrap(), link);
        }
        assert!(fs::symlink_metadata(&real).unwrap().is_file());
        assert_eq!(entries(&d), ["link.json", "link2.json", "runs"]);
        assert_eq!(entries(&d.join("runs")), ["real.json"]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn dangling_symlink_creates_its_target() {
        let d = temp_dir("through_dangling");
        fs::create_dir(d.join("runs")).unwrap();
        let link = d.join("next.svg");
        symlink("runs/new.svg", &link).unwrap();
        check_outputs(None, None, Some(&link)).unwrap();
        write_output(PLOT_FLAG, &link, b"<svg/>").unwrap();
        assert_eq!(
            fs::read_to_string(d.join("runs/new.svg")).unwrap(),
            "<svg/>"
        );
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        // A dangling link into a missing directory fails at the check,
        // naming that directory.
        symlink("gone/x.svg", d.join("bad.svg")).unwrap();
        let e = check_outputs(None, None, Some(&d.join("bad.svg"))).unwrap_err();
        assert!(matches!(e, ReportError::NoSuchDir { .. }), "{e}");
        assert!(e.to_string().contains("gone"), "{e}");
        assert_eq!(entries(&d), ["bad.svg", "next.svg", "runs"]);
        let _ = fs::remove_dir_all(&d);
    }

    /// Regression (issue 25): a hard-linked output was replaced, splitting
    /// it from its other names.
    #[test]
    fn hard_link_keeps_its_identity() {
        let d = temp_dir("inplace");
        let a = d.join("a.json");
        let b = d.join("b.json");
        fs::write(&a, "old contents, longer than the new").unwrap();
        fs::hard_link(&a, &b).unwrap();
        let ino = fs::metadata(&a).unwrap().ino();
        check_outputs(Some(&a), None, None).unwrap();
        write_output(JSON_FLAG, &a, b"new").unwrap();
        assert_eq!(fs::metadata(&a).unwrap().ino(), ino);
        assert_eq!(fs::metadata(&a).unwrap().nlink(), 2);
        assert_eq!(fs::read_to_string(&b).unwrap(), "new");
        assert_eq!(entries(&d), ["a.json", "b.json"]);
        let _ = fs::remove_dir_all(&d);
    }

    /// Regression (issue 25): names of 241-255 bytes failed with "File name
    /// too long" (the temporary file's name embedded the file's).
    #[test]
    fn longest_file_name_works() {
        let d = temp_dir("long");
        let name = format!("{}.json", "n".repeat(250));
        assert_eq!(name.len(), 255);
        let p = d.join(&name);
        check_outputs(Some(&p), None, None).unwrap();
        write_output(JSON_FLAG, &p, b"1").unwrap();
        write_output(JSON_FLAG, &p, b"2").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "2");
        assert_eq!(entries(&d), [name]);
        let _ = fs::remove_dir_all(&d);
    }
}
