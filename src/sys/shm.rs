//! Shared memory: a file mapped `MAP_SHARED` (see the module doc of
//! [`crate::sys`] for the protocol the safe API relies on).
//!
//! A segment the job shares is created without a name
//! ([`Mapping::create_exported`]: a `memfd`) and exported as a handle, the
//! way CUDA IPC exports device memory: the creator publishes the handle,
//! each peer maps it ([`Mapping::open`] of the handle's path,
//! `/proc/<pid>/fd/<n>`), and the creator closes it once every peer did.
//! No name exists in any directory at any moment, so a job killed at any
//! point (even with `SIGKILL`, even between creating a segment and its
//! peers mapping it) leaves no shared memory behind: the kernel frees a
//! segment with its last mapping or descriptor.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

/// A file of `len` bytes mapped read-write and shared into this process.
/// Unmapped on drop (the file stays until it is removed), unless it was
/// kept mapped for good ([`Mapping::keep_mapped`]).
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    path: PathBuf,
    /// Never unmapped: a library may still write it ([`Mapping::keep_mapped`]).
    kept: bool,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to
// another thread moves nothing but the address.
unsafe impl Send for Mapping {}
// SAFETY: shared access hands out only atomics (`words`) or, through
// `&mut self`, one exclusive byte slice (`bytes_mut`); see the module doc of
// `crate::sys` for the cross-process protocol.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({}, {} bytes)", self.path.display(), self.len)
    }
}

/// The handle of a segment made by [`Mapping::create_exported`]: while it
/// lives, other processes of the same user can map the segment through
/// [`Export::path`]; dropping it closes the descriptor (existing mappings
/// stay).
#[derive(Debug)]
pub struct Export {
    /// The descriptor the path names: held open as long as the export.
    _file: File,
    path: PathBuf,
}

impl Export {
    /// The path a peer opens to map the segment: `/proc/<pid>/fd/<n>`. The
    /// number may be reused after this handle is dropped, so a publisher
    /// sends it beside a name that is unique to the segment.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Mapping {
    /// Create a nameless segment of `len` bytes (zeroed; `name` only labels
    /// it in `/proc/<pid>/maps` and errors), map it, and return the mapping
    /// with its [`Export`] handle.
    pub(crate) fn create_exported(name: &str, len: usize) -> io::Result<(Mapping, Export)> {
        let cname = CString::new(name).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("segment name {name:?} holds a NUL byte"),
            )
        })?;
        // SAFETY: `cname` is a NUL-terminated string that outlives the call;
        // memfd_create reads it and returns a new descriptor or -1.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create, is open, and is
        // owned by nothing else in this process: the File becomes its only
        // owner and closes it on drop.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(len as u64)?;
        let label = PathBuf::from(format!("memfd:{name}"));
        let map = Self::map(&file, &label, len)?;
        let path = PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()));
        Ok((map, Export { _file: file, path }))
    }

    /// Map the existing file `path`, which must hold at least `len` bytes
    /// (a peer's segment: its [`Export::path`]).
    pub fn open(path: &Path, len: usize) -> io::Result<Mapping> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| {
                if path.starts_with("/proc") {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "{e} (a peer's segment handle: the peer must still hold it open, \
                             run as the same user and in the same PID namespace)"
                        ),
                    )
                } else {
                    e
                }
            })?;
        let have = f.metadata()?.len();
        if have < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} holds {have} bytes, expected at least {len}",
                    path.display()
                ),
            ));
        }
        Self::map(&f, path, len)
    }

    fn map(f: &File, path: &Path, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Ok(Mapping {
                ptr: NonNull::dangling(),
                len: 0,
                path: path.to_path_buf(),
                kept: false,
            });
        }
        // SAFETY: a fresh mapping chosen by the kernel (no address hint), of
        // a file descriptor that is open for reading and writing and whose
        // file holds at least `len` bytes; nothing else in this process
        // refers to the new range. The descriptor may be closed afterwards.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping {
            ptr,
            len,
            path: path.to_path_buf(),
            kept: false,
        })
    }

    /// Keep the range mapped for good, whoever drops this value: after a
    /// failed wait on a collective that writes into it (`crate::sys::mpi`),
    /// the library may still write it, so it must never be unmapped (and
    /// its address never reused). Its bytes are then undefined: the call
    /// failed, and the engine that holds it refuses later calls.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn keep_mapped(&mut self) {
        self.kept = true;
    }

    /// The mapping as 64-bit atomic words (`len / 8` of them). Every
    /// process accesses control words only this way.
    pub fn words(&self) -> &[AtomicU64] {
        if self.len < 8 {
            return &[];
        }
        // SAFETY: the mapping is page-aligned (so 8-byte aligned), lives as
        // long as `self`, and holds `len / 8` whole words; `AtomicU64` has
        // the size and alignment of `u64` and allows shared mutation, which
        // is what the other processes do (always atomically, see the module
        // doc of `crate::sys`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }

    /// The mapping as bytes, exclusively for this process's holder of
    /// `&mut self`. Other processes access the same bytes only when the
    /// plan's signals say this process is not (module doc of `crate::sys`).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: in bounds of a live mapping; `&mut self` makes the slice
        // the only reference in this process; across processes the plan
        // orders every access (see the module doc of `crate::sys`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 && !self.kept {
            // SAFETY: the range was mapped by `map` and no reference into it
            // outlives `self` (the accessors borrow `self`). Errors ignored.
            let _ = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        }
    }
}

#[cfg(test)]
mod tests;
