//! Filesystem usage by statfs: capacity, available bytes and inodes of the
//! filesystem holding a directory. nodefs is the root dir's (and the pod
//! log dir's) filesystem; imagefs the container runtime's root, when the
//! runtime keeps its images on another filesystem.

use super::StatsError;
use std::path::Path;

/// One filesystem's space and inodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsStats {
    pub capacity_bytes: u64,
    /// Space an unprivileged writer can use (`f_bavail`), as kubelet counts it.
    pub available_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
    /// The filesystem's identity (`f_fsid`), to tell whether two
    /// directories share one filesystem.
    pub fsid: u64,
}

impl FsStats {
    /// From statfs's block counts (`f_frsize`, falling back to `f_bsize`
    /// when 0, as in statvfs).
    pub fn from_counts(
        block_size: u64,
        blocks: u64,
        blocks_avail: u64,
        files: u64,
        files_free: u64,
        fsid: u64,
    ) -> FsStats {
        FsStats {
            capacity_bytes: blocks.saturating_mul(block_size),
            available_bytes: blocks_avail.saturating_mul(block_size),
            inodes: files,
            inodes_free: files_free,
            fsid,
        }
    }
}

/// statfs of the filesystem holding `dir`.
pub fn read(dir: &Path) -> Result<FsStats, StatsError> {
    let st = rustix::fs::statvfs(dir).map_err(|e| StatsError::Read {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    let bsize = if st.f_frsize > 0 {
        st.f_frsize
    } else {
        st.f_bsize
    };
    Ok(FsStats::from_counts(
        bsize,
        st.f_blocks,
        st.f_bavail,
        st.f_files,
        st.f_ffree,
        st.f_fsid,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_counts_become_bytes() {
        let fs = FsStats::from_counts(4096, 1000, 250, 500, 100, 7);
        assert_eq!(fs.capacity_bytes, 4096 * 1000);
        assert_eq!(fs.available_bytes, 4096 * 250);
        assert_eq!((fs.inodes, fs.inodes_free, fs.fsid), (500, 100, 7));
    }

    #[test]
    fn the_filesystem_of_the_temp_dir_has_a_size() {
        let fs = read(&std::env::temp_dir()).unwrap();
        assert!(fs.capacity_bytes > 0);
        assert!(fs.available_bytes <= fs.capacity_bytes);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let err = read(Path::new("/nonexistent/picolet")).unwrap_err();
        assert!(err.is_not_found(), "{err}");
    }
}
