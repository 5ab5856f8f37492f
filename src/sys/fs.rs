//! File-system calls std does not offer, for a tool's output files
//! (public as [`crate::os::check_writable`]).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `Ok` if this process (its effective user and groups) may write `path`,
/// following symbolic links: `faccessat(2)` with `W_OK` and `AT_EACCESS`.
/// It opens nothing, so a FIFO without a reader does not block and a device
/// sees no `open`.
pub fn check_writable(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path holds a NUL byte"))?;
    // SAFETY: `c` is a NUL-terminated string that lives until the call
    // returns; faccessat only reads it and keeps no pointer to it.
    let r = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests;
