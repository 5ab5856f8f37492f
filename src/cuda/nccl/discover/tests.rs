use super::super::binding::Nccl;
use super::super::testutil::{fake_or_skip, TempDir};
use super::*;

/// A name the dynamic linker cannot find, so hermetic searches never load a real NCCL.
const ABSENT: [&str; 1] = ["libringreduce-test-absent-nccl.so.2"];

fn hermetic_env(root: &Path) -> SearchEnv {
    SearchEnv {
        nccl_home: None,
        virtual_env: None,
        conda_prefix: None,
        home: None,
        root: root.to_path_buf(),
        sonames: &ABSENT,
        query_python: false,
    }
}

fn not_found(r: Result<Found, NcclError>) -> Vec<String> {
    match r {
        Err(NcclError::NotFound { tried }) => tried,
        Err(other) => panic!("expected NotFound, got {other}"),
        Ok(found) => panic!("expected NotFound, loaded {}", found.path.display()),
    }
}

#[test]
fn load_none_lists_every_place_tried() {
    match Nccl::load(None) {
        Ok(nccl) => eprintln!(
            "NCCL present at {}; search test skipped",
            nccl.path().display()
        ),
        Err(NcclError::NotFound { tried }) => {
            assert!(
                tried.iter().any(|t| t.starts_with("libnccl.so.2 ")),
                "{tried:?}"
            );
            assert!(
                tried.iter().any(|t| t.starts_with("libnccl.so ")),
                "{tried:?}"
            );
            let wheel = tried.iter().any(|t| {
                t.contains("nvidia/nccl/lib/libnccl.so.2")
                    && (t.contains("python3*/{site,dist}-packages") || t.contains("Python wheel"))
            });
            assert!(wheel, "{tried:?}");
            if let Some(home) = crate::param::NCCL_HOME.raw() {
                let home = Path::new(&home);
                if !home.is_file() {
                    let want = home.join("lib/libnccl.so.2").display().to_string();
                    assert!(tried.iter().any(|t| t.starts_with(&want)), "{tried:?}");
                }
            }
            let shown = NcclError::NotFound { tried }.to_string();
            assert!(
                shown.starts_with("NCCL library not found (tried: "),
                "{shown}"
            );
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[test]
fn override_path_does_not_fall_back() {
    let path = Path::new("/nonexistent/libnccl.so.2");
    match Nccl::load(Some(path)) {
        Err(NcclError::Load { path: p, reason }) => {
            assert_eq!(p, "/nonexistent/libnccl.so.2");
            assert!(!reason.is_empty());
        }
        other => panic!("expected Load error, got {other:?}"),
    }
}

#[test]
fn override_path_that_is_not_a_library() {
    let tmp = TempDir::new("override");
    let fake = tmp.fake_file("libnccl.so.2");
    match Nccl::load(Some(&fake)) {
        Err(NcclError::Load { path, reason }) => {
            assert_eq!(path, fake.display().to_string());
            assert!(!reason.is_empty());
        }
        other => panic!("expected Load error, got {other:?}"),
    }
}

#[test]
fn candidate_order_with_nccl_home_dir() {
    let tmp = TempDir::new("home-order");
    let site = PathBuf::from("/some/site-packages");
    let mut got = early_candidates(Some(tmp.0.as_os_str()), &SONAMES);
    got.extend(wheel_candidates(std::slice::from_ref(&site)));
    let want = vec![
        Candidate::File(tmp.0.join("lib/libnccl.so.2")),
        Candidate::File(tmp.0.join("lib/libnccl.so")),
        Candidate::File(tmp.0.join("lib64/libnccl.so.2")),
        Candidate::File(tmp.0.join("lib64/libnccl.so")),
        Candidate::Name("libnccl.so.2"),
        Candidate::Name("libnccl.so"),
        Candidate::Wheel(site.join("nvidia/nccl/lib/libnccl.so.2")),
    ];
    assert_eq!(got, want);
}

#[test]
fn candidate_order_without_or_with_file_nccl_home() {
    let names = vec![
        Candidate::Name("libnccl.so.2"),
        Candidate::Name("libnccl.so"),
    ];
    assert_eq!(early_candidates(None, &SONAMES), names);
    assert_eq!(early_candidates(Some(OsStr::new("")), &SONAMES), names);

    let tmp = TempDir::new("home-file");
    let file = tmp.fake_file("my-libnccl.so");
    let got = early_candidates(Some(file.as_os_str()), &SONAMES);
    assert_eq!(got[0], Candidate::File(file.clone()));
    assert_eq!(&got[1..], &names[..]);
}

#[test]
fn not_found_message_lists_every_candidate_in_order() {
    let tmp = TempDir::new("home-fake");
    let home = tmp.0.join("nccl-home");
    let fake = tmp.fake_file("nccl-home/lib/libnccl.so.2");
    let mut env = hermetic_env(&tmp.0.join("root"));
    env.nccl_home = Some(home.clone().into_os_string());
    let tried = not_found(search(&env));
    assert_eq!(tried.len(), 6, "{tried:?}");
    // 1: the $NCCL_HOME file that exists but is no library, with the loader's reason.
    let prefix = format!("{}: ", fake.display());
    assert!(tried[0].starts_with(&prefix), "{tried:?}");
    assert!(!tried[0].contains("os error 2"), "{tried:?}");
    // 2-4: the missing ones, in order.
    for (t, rel) in
        tried[1..4]
            .iter()
            .zip(["lib/libnccl.so", "lib64/libnccl.so.2", "lib64/libnccl.so"])
    {
        let want = format!("{}: ", home.join(rel).display());
        assert!(
            t.starts_with(&want) && t.contains("os error 2"),
            "{tried:?}"
        );
    }
    // 5: the dynamic linker's name.
    assert!(
        tried[4].starts_with(&format!("{} (dynamic linker search path): ", ABSENT[0])),
        "{tried:?}"
    );
    // 6: the wheel note with every pattern searched.
    assert!(
        tried[5].starts_with("nvidia/nccl/lib/libnccl.so.2 of a Python wheel"),
        "{tried:?}"
    );
    assert!(tried[5].contains("no site dir exists"), "{tried:?}");
    for pattern in wheel_patterns(&env) {
        assert!(tried[5].contains(&pattern), "{pattern} in {tried:?}");
    }
    let shown = NcclError::NotFound { tried }.to_string();
    assert!(shown.contains(&fake.display().to_string()), "{shown}");
}

#[test]
fn wheel_dirs_are_globbed_and_tried() {
    let tmp = TempDir::new("wheels");
    let root = tmp.0.join("root");
    let venv = tmp.0.join("venv");
    let home = tmp.0.join("home");
    let w_venv = tmp.fake_file("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
    let w_usr = tmp.fake_file("root/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2");
    let w_opt = tmp
        .fake_file("root/opt/proj/.venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2");
    fs::create_dir_all(home.join(".local/lib/python3.10/site-packages")).unwrap();
    fs::create_dir_all(root.join("usr/local/lib/python2.7/site-packages")).unwrap();

    let mut env = hermetic_env(&root);
    env.virtual_env = Some(venv.clone().into_os_string());
    env.home = Some(home.clone().into_os_string());
    let dirs = wheel_site_dirs(&env);
    assert_eq!(
        dirs,
        vec![
            venv.join("lib/python3.12/site-packages"),
            root.join("usr/lib/python3/dist-packages"),
            home.join(".local/lib/python3.10/site-packages"),
            root.join("opt/proj/.venv/lib/python3.11/site-packages"),
        ]
    );

    let tried = not_found(search(&env));
    // The linker name, then the three wheel files (the home site dir has none: skipped
    // silently); wheels were seen, so no note.
    assert_eq!(tried.len(), 4, "{tried:?}");
    for (t, w) in tried[1..].iter().zip([&w_venv, &w_usr, &w_opt]) {
        let want = format!("{} (Python wheel): ", w.display());
        assert!(t.starts_with(&want), "{tried:?}");
    }
}

#[test]
fn wheel_note_names_the_site_dirs_searched() {
    let tmp = TempDir::new("nowheel");
    let root = tmp.0.join("root");
    fs::create_dir_all(root.join("usr/lib/python3.12/site-packages")).unwrap();
    let env = hermetic_env(&root);
    let tried = not_found(search(&env));
    assert_eq!(tried.len(), 2, "{tried:?}");
    let dir = root.join("usr/lib/python3.12/site-packages");
    assert!(
        tried[1].contains(&format!("not in {}", dir.display())),
        "{tried:?}"
    );
    let patterns = wheel_patterns(&env);
    assert!(patterns.iter().any(|p| p.contains("usr/lib/python3*")));
    assert!(patterns
        .iter()
        .any(|p| p.contains("opt/*/.venv/lib/python3*")));
}

#[test]
fn fake_nccl_home_is_found_before_the_linker_and_wheels() {
    let tmp = TempDir::new("home-real");
    // lib/ holds garbage, lib64/ a working fake: the search goes on past the bad file.
    tmp.fake_file("home/lib/libnccl.so.2");
    let Some(home_lib) = fake_or_skip(&tmp, "home/lib64/libnccl.so.2", 22803, &[]) else {
        return;
    };
    let Some(_wheel) = fake_or_skip(
        &tmp,
        "venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        22105,
        &[],
    ) else {
        return;
    };
    let mut env = hermetic_env(&tmp.0.join("root"));
    env.virtual_env = Some(tmp.0.join("venv").into_os_string());

    // Without $NCCL_HOME the wheel is found.
    let found = search(&env).unwrap();
    let nccl = Nccl::from_library(found.lib, &found.path).unwrap();
    assert_eq!(nccl.version_string().unwrap(), "2.21.5");

    // With it, $NCCL_HOME/lib64 wins.
    env.nccl_home = Some(tmp.0.join("home").into_os_string());
    let found = search(&env).unwrap();
    assert_eq!(found.path, home_lib.path);
    let nccl = Nccl::from_library(found.lib, &found.path).unwrap();
    assert_eq!(nccl.path(), home_lib.path.as_path());
    assert_eq!(nccl.version().unwrap(), 22803);
    assert_eq!(nccl.version_string().unwrap(), "2.28.3");
}

#[test]
fn resolved_path_keeps_explicit_paths() {
    let p = Path::new("/x/libnccl.so.2");
    assert_eq!(resolved_path(p, 0), p);
    // A bare name resolves to the file mapped at the address (this test binary here).
    let here = resolved_path(
        Path::new("libnccl.so.2"),
        maps_parsing as *const () as usize,
    );
    assert!(here.is_absolute(), "{}", here.display());
    assert_eq!(
        resolved_path(Path::new("libnccl.so.2"), 0),
        Path::new("libnccl.so.2")
    );
}

#[test]
fn maps_parsing() {
    let maps = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 123 /usr/bin/cat
7f0000000000-7f0000100000 r-xp 00010000 fd:01 456 /opt/my dir/libnccl.so.2.28.3
7f0000100000-7f0000200000 r-xp 00000000 00:00 0 
7f0000200000-7f0000300000 r-xp 00000000 fd:01 789 /tmp/libx.so (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";
    assert_eq!(
        path_in_maps(maps, 0x7f00_0000_1234),
        Some(PathBuf::from("/opt/my dir/libnccl.so.2.28.3"))
    );
    assert_eq!(path_in_maps(maps, 0x7f00_0010_0000), None);
    assert_eq!(
        path_in_maps(maps, 0x7f00_0020_0000),
        Some(PathBuf::from("/tmp/libx.so"))
    );
    assert_eq!(path_in_maps(maps, 0x7ffd_0000_0010), None);
    assert_eq!(path_in_maps(maps, 0x10), None);
    // This very function's code is mapped from the test binary.
    assert!(mapped_file_containing(maps_parsing as *const () as usize).is_some());
}
