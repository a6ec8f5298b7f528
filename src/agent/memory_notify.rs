//! The memcg threshold notification (cgroup v1 `cgroup.event_control` with
//! an eventfd): the kernel wakes the eviction task as soon as the root
//! cgroup's memory usage crosses the usage at which `memory.available`
//! would meet its threshold, so a fast allocation is caught between two
//! 10 s passes. Re-armed after every pass with the numbers of that pass
//! (kubelet's `UpdateThreshold`). cgroup v2 has no usage thresholds; there
//! the 10 s pass stays the only trigger for now.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use smol::Async;

/// One armed notification; dropping it (closing the eventfd) unregisters
/// it in the kernel.
pub(super) struct MemoryNotifier {
    efd: Async<OwnedFd>,
    _usage: File,
}

/// The root memcg usage at which `memory.available` (capacity minus usage
/// plus inactive file pages) falls below `threshold`.
pub(super) fn usage_threshold(capacity: u64, threshold: u64, inactive_file: u64) -> u64 {
    capacity
        .saturating_sub(threshold)
        .saturating_add(inactive_file)
}

impl MemoryNotifier {
    /// Arms a notification on the v1 memory cgroup directory `memcg` for
    /// usage crossing `usage_bytes`.
    pub fn arm(memcg: &Path, usage_bytes: u64) -> io::Result<MemoryNotifier> {
        let efd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        let usage = File::open(memcg.join("memory.usage_in_bytes"))?;
        let line = format!("{} {} {usage_bytes}", efd.as_raw_fd(), usage.as_raw_fd());
        std::fs::write(memcg.join("cgroup.event_control"), line)?;
        Ok(MemoryNotifier {
            efd: Async::new(efd)?,
            _usage: usage,
        })
    }

    /// Resolves when the threshold was crossed.
    pub async fn crossed(&self) {
        if self.efd.readable().await.is_ok() {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(self.efd.get_ref(), &mut count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usage_threshold_is_where_available_memory_meets_the_eviction_threshold() {
        let table = [(1000, 100, 0, 900), (1000, 100, 50, 950), (100, 200, 0, 0)];
        for (capacity, threshold, inactive, want) in table {
            assert_eq!(usage_threshold(capacity, threshold, inactive), want);
        }
    }
}
