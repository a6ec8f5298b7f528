//! The memory notifications that wake the eviction task between two 10 s
//! passes, so a fast allocation is caught before the next pass.
//!
//! - cgroup v1: the memcg threshold notification (`cgroup.event_control`
//!   with an eventfd). The kernel wakes the task as soon as the root
//!   cgroup's memory usage crosses the usage at which `memory.available`
//!   would meet its threshold. After every pass the wanted threshold is
//!   recomputed with that pass's numbers (kubelet's `UpdateThreshold`), but
//!   the armed one is kept while it is within [`keeps`]'s tolerance:
//!   registering a threshold blocked the agent's thread for 29 ms on this
//!   machine's v1 kernel (the kernel copies the threshold array and waits
//!   for an RCU grace period), every 10 s, for a number that moves by a few
//!   pages of page cache.
//! - cgroup v2 has no usage thresholds. The `kubepods` cgroup's
//!   `memory.events.local` (`memory.events` on kernels without it) is
//!   watched with inotify: the kernel reports a file-modified event when
//!   one of its counters changes, and a `max`, `high`, `oom` or `oom_kill`
//!   that grew means the pods together reached node allocatable (the limit
//!   enforced on `kubepods`). The pass that follows decides with the same
//!   thresholds as every other pass.
//!
//! - cgroup v2 also arms a PSI trigger on the node's memory pressure
//!   (`/proc/pressure/memory`, `some <stall> <window>`): it fires when
//!   tasks stalled on memory (reclaim, refaults) for that long within the
//!   window, which is how a node running out of memory shows itself before
//!   the pods reach allocatable. A trigger fd reports with `POLLPRI` and is
//!   otherwise always readable, and `smol::Async` waits on readable only,
//!   so the trigger sits in an epoll instance of its own, registered for
//!   `EPOLLPRI`: that epoll fd becomes readable exactly when the trigger
//!   fires, and `Async` waits on it with no extra thread.

use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::event::epoll;
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use smol::Async;

use crate::node::stats::memory::MemoryEvents;
use crate::node::stats::Buf;

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

/// The inotify watch on the `kubepods` cgroup's memory events (cgroup v2).
pub(super) struct EventsWatch {
    fd: Async<OwnedFd>,
    file: PathBuf,
    last: MemoryEvents,
}

impl EventsWatch {
    /// Watches `memory.events.local` (else `memory.events`) in the v2
    /// cgroup directory `dir`, from the counters it shows now.
    pub fn new(dir: &Path, buf: &mut Buf) -> io::Result<EventsWatch> {
        let local = dir.join("memory.events.local");
        let file = if local.exists() {
            local
        } else {
            dir.join("memory.events")
        };
        let last = read_events(&file, buf)?;
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        inotify::add_watch(&fd, &file, WatchFlags::MODIFY)?;
        Ok(EventsWatch {
            fd: Async::new(fd)?,
            file,
            last,
        })
    }

    /// The file watched.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Resolves when a limit counter grew, with its key (`max`, `oom`...).
    /// Changes of the other counters are absorbed.
    pub async fn limit_reached(&mut self, buf: &mut Buf) -> io::Result<&'static str> {
        loop {
            self.fd.readable().await?;
            self.drain()?;
            let now = read_events(&self.file, buf)?;
            let grown = now.grown_since(&self.last);
            self.last = now;
            if let Some(key) = grown {
                return Ok(key);
            }
        }
    }

    /// Reads every queued inotify event (they only say "changed").
    fn drain(&self) -> io::Result<()> {
        let mut raw = [MaybeUninit::<u8>::uninit(); 512];
        let mut reader = inotify::Reader::new(self.fd.get_ref(), &mut raw);
        loop {
            match reader.next() {
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A PSI trigger, waited for through its own epoll instance.
pub(super) struct PsiTrigger {
    _psi: OwnedFd,
    epoll: Async<OwnedFd>,
}

impl PsiTrigger {
    /// Arms `some <stall_us> <window_us>` on the pressure file `file`
    /// (`/proc/pressure/memory`, or a cgroup's `memory.pressure`).
    pub fn arm(file: &Path, stall_us: u64, window_us: u64) -> io::Result<PsiTrigger> {
        use rustix::fs::{Mode, OFlags};
        let psi = rustix::fs::open(
            file,
            OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let line = format!("some {stall_us} {window_us}\0");
        rustix::io::write(&psi, line.as_bytes())?;
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &ep,
            &psi,
            epoll::EventData::new_u64(0),
            epoll::EventFlags::PRI,
        )?;
        Ok(PsiTrigger {
            _psi: psi,
            epoll: Async::new(ep)?,
        })
    }

    /// Resolves when the trigger fired.
    pub async fn fired(&self) -> io::Result<()> {
        self.epoll.readable().await?;
        // Empty the inner ready list (the trigger's event itself was taken
        // when the reactor polled the epoll fd).
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); 2];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        epoll::wait(self.epoll.get_ref(), &mut events[..], Some(&zero))?;
        Ok(())
    }
}

fn read_events(file: &Path, buf: &mut Buf) -> io::Result<MemoryEvents> {
    buf.parse(file, MemoryEvents::parse)
        .map_err(io::Error::other)
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

    #[test]
    fn a_grown_max_counter_in_the_watched_file_wakes_the_watch() {
        let t = crate::cgroups::testutil::TempTree::new("memory-events-watch");
        t.put(
            "kubepods/memory.events",
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
        );
        let dir = t.path().join("kubepods");
        let mut buf = Buf::new();
        let mut watch = EventsWatch::new(&dir, &mut buf).unwrap();
        assert_eq!(watch.file(), dir.join("memory.events"));
        // The kernel's file-modified event, and `max` grown.
        t.put(
            "kubepods/memory.events",
            "low 1\nhigh 0\nmax 4\noom 0\noom_kill 0\n",
        );
        let key = smol::block_on(watch.limit_reached(&mut buf)).unwrap();
        assert_eq!(key, "max");
    }

    #[test]
    fn a_psi_trigger_is_armed_behind_an_epoll_instance_of_its_own() {
        let file = Path::new("/proc/pressure/memory");
        match PsiTrigger::arm(file, 100_000, 1_000_000) {
            Ok(t) => {
                // The epoll instance holding it can be waited on.
                let mut events = [MaybeUninit::<epoll::Event>::uninit(); 1];
                let zero = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                epoll::wait(t.epoll.get_ref(), &mut events[..], Some(&zero)).unwrap();
            }
            // A kernel without PSI, or not root: nothing to test here.
            Err(e) => eprintln!("skipped: {}: {e}", file.display()),
        }
        // A trigger the kernel refuses (window under 500 ms) is an error.
        if file.exists() && rustix::process::geteuid().is_root() {
            assert!(PsiTrigger::arm(file, 1_000, 10_000).is_err());
        }
    }
}
