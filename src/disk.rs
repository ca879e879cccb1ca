//! Free and total space of the file system that holds a root, for health
//! and doctor.

use std::path::Path;

/// Bytes free for unprivileged users and total bytes, or `None` if the OS
/// cannot tell.
#[allow(unsafe_code)]
// The statvfs field types are narrower than u64 on some platforms.
#[allow(clippy::unnecessary_cast)]
pub fn space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to writable
    // memory of the right size; statvfs only writes into it.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled the whole struct.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize as u64;
    Some((st.f_bavail as u64 * frsize, st.f_blocks as u64 * frsize))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_some_space_for_the_temp_dir() {
        let (free, total) = super::space(&std::env::temp_dir()).unwrap();
        assert!(total > 0 && free <= total);
        assert!(super::space(std::path::Path::new("/nonexistent/path")).is_none());
    }
}
