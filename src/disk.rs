//! Free and total space of the file system that holds a root, for health
//! and doctor.

use std::path::Path;

/// Bytes free for unprivileged users and total bytes, or `None` if the OS
/// cannot tell (the path does not exist, or the platform has no such call).
pub(crate) fn space(path: &Path) -> Option<(u64, u64)> {
    let stats = fs4::statvfs(path).ok()?;
    Some((stats.available_space(), stats.total_space()))
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
