//! The memcg threshold notification (cgroup v1 `cgroup.event_control` with
//! an eventfd): the kernel wakes the eviction task as soon as the root
//! cgroup's memory usage crosses the usage at which `memory.available`
//! would meet its threshold, so a fast allocation is caught between two
//! 10 s passes. After every pass the wanted threshold is recomputed with
//! that pass's numbers (kubelet's `UpdateThreshold`), but the armed one is
//! kept while it is within [`keeps`]'s tolerance: registering a threshold
//! blocked the agent's thread for 29 ms on this machine's v1 kernel (the
//! kernel copies the threshold array and waits for an RCU grace period),
//! every 10 s, for a number that moves by a few pages of page cache.
//! cgroup v2 has no usage thresholds; there the 10 s pass stays the only
//! trigger for now.

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
    /// The usage it fires at.
    pub usage_bytes: u64,
}

/// Whether a notification armed at `armed` bytes of usage still serves for
/// `wanted` on a node of `capacity`: within 1% of capacity (2.5 MiB on a
/// 256 MiB board, far inside kubelet's smallest useful thresholds; the 10 s
/// pass measures exactly either way, the notification only wakes it early).
pub(super) fn keeps(armed: u64, wanted: u64, capacity: u64) -> bool {
    armed.abs_diff(wanted) <= capacity / 100
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
            usage_bytes,
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
    fn an_armed_threshold_is_kept_while_within_one_percent_of_capacity() {
        let gib = 1u64 << 30;
        assert!(keeps(gib / 2, gib / 2 + gib / 200, gib));
        assert!(keeps(gib / 2, gib / 2 - gib / 100, gib));
        assert!(!keeps(gib / 2, gib / 2 + gib / 50, gib));
    }

    #[test]
    fn the_usage_threshold_is_where_available_memory_meets_the_eviction_threshold() {
        let table = [(1000, 100, 0, 900), (1000, 100, 50, 950), (100, 200, 0, 0)];
        for (capacity, threshold, inactive, want) in table {
            assert_eq!(usage_threshold(capacity, threshold, inactive), want);
        }
    }
}
