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
