//! Builds the C side of the `mpi` feature's own MPI binding
//! (`src/sys/mpi_shim.c`) with the system's `mpicc`, and links the MPI
//! library the way `mpicc` says. Without the feature it does nothing: the
//! default build needs no MPI and no C compiler.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/sys/mpi_shim.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    if let Err(e) = build() {
        // A build script reports by failing the build with the reason.
        eprintln!("error: the `mpi` feature: {e}");
        std::process::exit(1);
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let o = cmd.output().map_err(|e| {
        format!("{cmd:?}: {e} (install an MPI: apt-get install libopenmpi-dev openmpi-bin)")
    })?;
    if !o.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

fn build() -> Result<(), String> {
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let obj = out.join("rr_mpi_shim.o");
    let lib = out.join("librr_mpi_shim.a");
    run(Command::new(&mpicc)
        .args(["-O2", "-fPIC", "-c", "src/sys/mpi_shim.c", "-o"])
        .arg(&obj))?;
    let _ = std::fs::remove_file(&lib);
    run(Command::new("ar").arg("crs").arg(&lib).arg(&obj))?;
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=rr_mpi_shim");
    // Open MPI: --showme:link; MPICH: -link_info (the link line).
    let link = run(Command::new(&mpicc).arg("--showme:link"))
        .or_else(|_| run(Command::new(&mpicc).arg("-link_info")))?;
    for tok in link.split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={d}");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{d}");
        } else if let Some(l) = tok.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={l}");
        } else if tok.starts_with("-Wl,") || tok == "-pthread" {
            println!("cargo:rustc-link-arg={tok}");
        }
    }
    Ok(())
}
