use super::*;

fn fill(text: &'static [u8]) -> impl FnOnce(*mut std::ffi::c_char, i32) -> sys::CUresult {
    move |p, len| {
        let n = text.len().min(len as usize);
        // SAFETY: `p` is the helper's buffer of `len` bytes; n <= len.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), p.cast::<u8>(), n) };
        sys::CUresult::CUDA_SUCCESS
    }
}

#[test]
fn a_driver_string_stops_at_its_nul_or_the_buffer_end() {
    let s = driver_string::<16>("cuDeviceGetName", fill(b"NVIDIA H200\0junk"));
    assert_eq!(s.map_err(|e| e.to_string()).as_deref(), Ok("NVIDIA H200"));
    let s = driver_string::<4>("cuDeviceGetName", fill(b"ABCDEFG"));
    assert_eq!(s.map_err(|e| e.to_string()).as_deref(), Ok("ABCD"));
}
