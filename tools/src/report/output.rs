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
mod tests;
