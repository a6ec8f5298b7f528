//! Watching the static pod directory: *when* to rescan it.
//!
//! [`FileSource`] turns a manifest directory into a stream of
//! [`SourceUpdate`]s, each the complete set of static pods, emitted only when
//! that set actually changed. It owns the I/O and timing; what the files
//! mean is [`super::file`]'s business.
//!
//! How it decides to rescan:
//!
//! - inotify on the directory (`smol::Async` over a non-blocking inotify fd,
//!   so it runs on the caller's executor, no thread). Events about editor
//!   droppings (`.swp`, `~`, dotfiles) are dropped without waking.
//!   - When every file the events name is *settled* (closed after writing,
//!     moved in or out, or deleted; see [`OpenWrites`]), the rescan runs at
//!     once: a manifest renamed into place, as the docs recommend and as
//!     provisioning tools do, starts its pod without a wait.
//!   - While a file may still be open for writing (created or modified, not
//!     yet closed), the rescan waits until it is closed or the directory has
//!     been quiet for ~100 ms (at most 2 s), so a `cp` of a large file or a
//!     slow writer produces one rescan and a half-written file is rarely
//!     seen.
//!
//!   Measured for issue #13 (10 static pods, manifests renamed into place):
//!   the fixed 100 ms debounce was half of picolet's own start time on top
//!   of the bare CRI client's.
//! - a periodic rescan every `period` (the kubelet's `fileCheckFrequency`)
//!   as a backstop for what inotify cannot see: symlink targets changing,
//!   a queue overflow, an inotify fd we could not get.
//! - if the directory is missing (at start, or deleted or moved later) its
//!   parent is watched for the name to reappear, and the periodic rescan
//!   keeps trying to re-add the watch.
//!
//! Every rescan compares the set (the same pod objects, in order, and
//! whether the set is authoritative) with the last one emitted; an
//! unchanged set is not emitted, so the agent is only woken for real
//! changes, and the first successful read after an error is always
//! emitted, so the source becomes ready. [`FileSource`] is a
//! [`super::Source`]: the agent drives it like any other source.
//!
//! The rescan itself is cheap: an unchanged file is read and hashed, but
//! neither re-parsed nor copied ([`ManifestDir`] hands out the pod it
//! parsed before). Measured for issue #13 with 30 static pods idle: the
//! periodic rescan used to clone every pod twice and serialise each to
//! JSON for the comparison, about 5 % of picolet's idle CPU.

use std::ffi::{OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use smol::{future, Async, Timer};

use super::file::{is_ignored_file_name, ManifestDir};
use super::{PodSource, Source, SourceUpdate};

/// Quiet time after the last inotify event before rescanning, while a file
/// may still be open for writing.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// Upper bound on the debounce, for a directory that never goes quiet.
const MAX_DEBOUNCE: Duration = Duration::from_secs(2);

/// The pods of the last emitted set, kept to compare the next set with by
/// identity: [`ManifestDir`] hands out the same `Rc` for a file whose
/// content did not change, so a periodic rescan of an unchanged directory
/// neither copies nor serialises a pod. Holding them keeps the allocations
/// alive, so an address is never reused by a different pod meanwhile.
type EmittedPods = Vec<Rc<Pod>>;

/// The files a writer may still be writing, from the inotify events since
/// the last rescan: named by a create or modify event and not since by a
/// close-after-write, a move or a delete. Pure: fed event flags and names.
///
/// Bounded: past [`OpenWrites::CAP`] names (or after a queue overflow, which
/// loses events) it stops tracking and reports unsettled until
/// [`forget`](OpenWrites::forget), so the rescan falls back to the quiet-time
/// debounce rather than trusting a partial record.
#[derive(Debug, Default)]
struct OpenWrites {
    names: Vec<OsString>,
    lost_track: bool,
}

impl OpenWrites {
    const CAP: usize = 32;

    /// One event on the directory, about `name`.
    fn apply(&mut self, flags: ReadFlags, name: &OsStr) {
        if flags.contains(ReadFlags::ISDIR) {
            return;
        }
        let settles = ReadFlags::CLOSE_WRITE
            | ReadFlags::MOVED_TO
            | ReadFlags::MOVED_FROM
            | ReadFlags::DELETE;
        if flags.intersects(settles) {
            self.names.retain(|n| n != name);
        } else if flags.intersects(ReadFlags::CREATE | ReadFlags::MODIFY)
            && !self.names.iter().any(|n| n == name)
        {
            match self.names.len() < Self::CAP {
                true => self.names.push(name.to_owned()),
                false => self.lost_track = true,
            }
        }
    }

    /// Events were lost (the inotify queue overflowed).
    fn lose_track(&mut self) {
        self.lost_track = true;
    }

    /// No file is known to be open for writing: a rescan now reads whole
    /// files.
    fn settled(&self) -> bool {
        self.names.is_empty() && !self.lost_track
    }

    /// The directory went quiet: what was open is taken as written.
    fn forget(&mut self) {
        self.names.clear();
        self.lost_track = false;
    }
}

/// What is watched on the directory itself.
fn dir_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::MOVED_TO
        | WatchFlags::MOVED_FROM
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ATTRIB
}

/// What is watched on the parent while the directory is missing.
fn parent_flags() -> WatchFlags {
    WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR
}

/// The static pod source: a manifest directory plus the machinery to notice
/// when it changes. Single-threaded; drive it from the agent's executor.
pub struct FileSource {
    dir: ManifestDir,
    period: Duration,
    /// `None` if inotify is unavailable: then only the periodic rescan runs.
    inotify: Option<Async<OwnedFd>>,
    /// Watch on the directory itself, when it exists.
    dir_wd: Option<i32>,
    /// Watch on the parent, only while the directory is missing.
    parent_wd: Option<i32>,
    /// The directory's own name, to recognise it in the parent's events.
    dir_name: Option<OsString>,
    /// Relevant events were seen and not yet followed by a rescan. Kept in
    /// `self` so a `next()` dropped mid-debounce loses nothing.
    pending: bool,
    /// Files that may still be open for writing: the rescan waits for them.
    writes: OpenWrites,
    next_periodic: Instant,
    /// The pods of the last emitted set and whether it was
    /// authoritative; `None` before the first.
    last: Option<(EmittedPods, bool)>,
    /// Rescans run so far, emitted or not: what proves, in a test, that
    /// the directory was read again and found unchanged.
    scans: u64,
}

impl Source for FileSource {
    fn kind(&self) -> PodSource {
        PodSource::File
    }

    async fn next(&mut self) -> SourceUpdate {
        FileSource::next(self).await
    }
}

impl FileSource {
    /// Watch `dir` (the static pod path; a single manifest file also works)
    /// for node `node_name`, rescanning at least every `period`. Nothing is
    /// read until the first [`next`](Self::next).
    pub fn new(dir: PathBuf, node_name: String, period: Duration) -> Self {
        let inotify = match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(io::Error::from)
            .and_then(Async::new)
        {
            Ok(fd) => Some(fd),
            Err(e) => {
                log::warn!(
                    "inotify unavailable ({e}); static pod path {} will be rescanned every {period:?}",
                    dir.display()
                );
                None
            }
        };
        FileSource {
            dir_name: dir.file_name().map(OsStr::to_owned),
            dir: ManifestDir::new(dir, node_name),
            period,
            inotify,
            dir_wd: None,
            parent_wd: None,
            pending: false,
            writes: OpenWrites::default(),
            next_periodic: Instant::now(),
            last: None,
            scans: 0,
        }
    }

    /// The complete set of static pods, once it differs from the last set
    /// returned. The first call returns the current set immediately. Later
    /// calls wait for a change; they never return an unchanged set.
    ///
    /// Cancel-safe: dropping the future (e.g. when racing it against other
    /// events) loses no change; the next call picks it up.
    pub async fn next(&mut self) -> SourceUpdate {
        loop {
            if self.last.is_some() {
                self.wait().await;
            }
            // Watch first, then scan: a change after the scan then always
            // produces an event, never a gap.
            self.ensure_watch();
            let update = self.dir.scan();
            self.scans += 1;
            log::debug!("rescanned static pod path {}", self.dir.path().display());
            // Files left for the next scan (its parse budget) come soon, not
            // at the periodic rescan.
            if self.dir.has_deferred() {
                self.pending = true;
            }
            self.next_periodic = Instant::now() + self.period;
            let unchanged = self.last.as_ref().is_some_and(|(pods, authoritative)| {
                *authoritative == update.authoritative && same_pods(pods, &update.pods)
            });
            if !unchanged {
                self.last = Some((update.pods.clone(), update.authoritative));
                return update;
            }
        }
    }

    /// Wait until a rescan is due: the period elapsed, or relevant inotify
    /// events arrived and every file they name is settled or the directory
    /// then went quiet.
    async fn wait(&mut self) {
        loop {
            if self.pending {
                match self.writes.settled() {
                    // Still a turn for the agent's other tasks: a scan
                    // that left files for the next one comes back here.
                    true => future::yield_now().await,
                    false => self.debounce().await,
                }
                self.writes.forget();
                self.pending = false;
                return;
            }
            let deadline = self.next_periodic;
            let Some(fd) = self.inotify.as_ref() else {
                Timer::at(deadline).await;
                return;
            };
            let readable = future::or(async { fd.readable().await.map(|()| true) }, async {
                Timer::at(deadline).await;
                Ok(false)
            })
            .await;
            match readable {
                Ok(true) => self.drain(),
                Ok(false) => return,
                Err(e) => self.lose_inotify(e),
            }
        }
    }

    /// Wait for every file written to be closed, or for the directory to be
    /// quiet for [`DEBOUNCE`] (at most [`MAX_DEBOUNCE`]), absorbing the
    /// events that arrive meanwhile.
    async fn debounce(&mut self) {
        let give_up = Instant::now() + MAX_DEBOUNCE;
        loop {
            let Some(fd) = self.inotify.as_ref() else {
                Timer::after(DEBOUNCE).await;
                return;
            };
            let busy = future::or(async { fd.readable().await.map(|()| true) }, async {
                Timer::after(DEBOUNCE).await;
                Ok(false)
            })
            .await;
            match busy {
                Ok(true) => self.drain(),
                Ok(false) => return,
                Err(e) => self.lose_inotify(e),
            }
            if self.writes.settled() || Instant::now() >= give_up {
                return;
            }
        }
    }

    /// Read every queued inotify event; set `pending` if any matters.
    fn drain(&mut self) {
        let Some(fd) = self.inotify.as_ref() else {
            return;
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd.get_ref(), &mut buf);
        let mut dir_gone = false;
        let mut dir_moved = false;
        let result = loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => break Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => break Err(io::Error::from(e)),
            };
            let flags = event.events();
            let name = event.file_name().map(|n| OsStr::from_bytes(n.to_bytes()));
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                self.writes.lose_track();
                self.pending = true;
            } else if Some(event.wd()) == self.dir_wd {
                if flags.intersects(
                    ReadFlags::IGNORED
                        | ReadFlags::DELETE_SELF
                        | ReadFlags::MOVE_SELF
                        | ReadFlags::UNMOUNT,
                ) {
                    dir_gone = true;
                    dir_moved |= flags.contains(ReadFlags::MOVE_SELF);
                    self.pending = true;
                } else if let Some(name) = name {
                    if !is_ignored_file_name(&name.to_string_lossy()) {
                        self.writes.apply(flags, name);
                        self.pending = true;
                    }
                } else {
                    self.pending = true;
                }
            } else if Some(event.wd()) == self.parent_wd && name == self.dir_name.as_deref() {
                // The directory (re)appeared.
                self.pending = true;
            }
        };
        if dir_gone {
            if let Some(wd) = self.dir_wd.take() {
                if dir_moved {
                    // A moved directory is still watched at its new place.
                    let _ = inotify::remove_watch(fd.get_ref(), wd);
                }
            }
            log::info!(
                "static pod path {} was removed or moved; watching for it to come back",
                self.dir.path().display()
            );
        }
        if let Err(e) = result {
            self.lose_inotify(e);
        }
    }

    /// Make sure the directory is watched, or, while it is missing, its
    /// parent.
    fn ensure_watch(&mut self) {
        let Some(fd) = self.inotify.as_ref() else {
            return;
        };
        if self.dir_wd.is_some() {
            return;
        }
        match inotify::add_watch(fd.get_ref(), self.dir.path(), dir_flags()) {
            Ok(wd) => {
                self.dir_wd = Some(wd);
                if let Some(parent_wd) = self.parent_wd.take() {
                    let _ = inotify::remove_watch(fd.get_ref(), parent_wd);
                }
            }
            Err(e) => {
                if e != rustix::io::Errno::NOENT {
                    log::debug!("cannot watch {}: {e}", self.dir.path().display());
                }
                if self.parent_wd.is_none() {
                    let parent = self
                        .dir
                        .path()
                        .parent()
                        .filter(|p| !p.as_os_str().is_empty());
                    if let Some(parent) = parent {
                        self.parent_wd =
                            inotify::add_watch(fd.get_ref(), parent, parent_flags()).ok();
                    }
                }
            }
        }
    }

    /// inotify failed for good: fall back to periodic rescans only.
    fn lose_inotify(&mut self, e: io::Error) {
        log::warn!(
            "inotify on {} failed ({e}); falling back to rescanning every {:?}",
            self.dir.path().display(),
            self.period
        );
        self.inotify = None;
        self.dir_wd = None;
        self.parent_wd = None;
        self.writes.lose_track();
        self.pending = true;
    }
}

/// The same pod objects in the same order: the set did not change. A file
/// rewritten with other bytes that parse to the same pod is a new object,
/// and is emitted; the agent finds nothing to do for it.
fn same_pods(a: &[Rc<Pod>], b: &[Rc<Pod>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| Rc::ptr_eq(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::future::Future;

    const NODE: &str = "edge-1";

    fn pod_yaml(name: &str, image: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n\
             spec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
    }

    fn temp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("picolet-watch-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// Run `f` to completion, failing the test if it takes longer than `limit`.
    fn within<T>(limit: Duration, f: impl Future<Output = T>) -> T {
        smol::block_on(future::or(async { Some(f.await) }, async {
            Timer::after(limit).await;
            None
        }))
        .unwrap_or_else(|| panic!("nothing happened within {limit:?}"))
    }

    /// Whether `f` finishes within `limit`.
    fn finishes_within<T>(limit: Duration, f: impl Future<Output = T>) -> bool {
        smol::block_on(future::or(
            async {
                f.await;
                true
            },
            async {
                Timer::after(limit).await;
                false
            },
        ))
    }

    fn names(update: &SourceUpdate) -> Vec<String> {
        update
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect()
    }

    // A long period: these changes must be noticed through inotify.
    const LONG: Duration = Duration::from_secs(3600);
    const SOON: Duration = Duration::from_secs(5);

    #[test]
    fn the_watcher_sees_a_manifest_appear_change_and_disappear() {
        let dir = temp_dir("basic");
        fs::create_dir_all(&dir).unwrap();
        let mut source = FileSource::new(dir.clone(), NODE.into(), LONG);

        let first = within(Duration::from_millis(500), source.next());
        assert!(
            first.pods.is_empty(),
            "the first call returns the current (empty) set"
        );

        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        let update = within(SOON, source.next());
        assert_eq!(names(&update), ["web-edge-1"]);
        let uid = update.pods[0].metadata.uid.clone();

        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:2")).unwrap();
        let update = within(SOON, source.next());
        assert_eq!(names(&update), ["web-edge-1"]);
        assert_ne!(update.pods[0].metadata.uid, uid, "an edit is a new pod");

        fs::remove_file(dir.join("web.yaml")).unwrap();
        let update = within(SOON, source.next());
        assert!(update.pods.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unchanged_set_is_not_emitted_again() {
        let dir = temp_dir("quiet");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        // A short period: rescans happen, but find nothing new.
        let mut source = FileSource::new(dir.clone(), NODE.into(), Duration::from_millis(20));
        assert_eq!(names(&within(SOON, source.next())), ["web-edge-1"]);

        fs::write(dir.join(".web.yaml.swp"), "vim swap").unwrap();
        // The same content again.
        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        // Two rescans after the writes (each one reads them) prove the
        // directory was read again; next() is cut short between polls,
        // which loses nothing.
        let after_writes = source.scans;
        while source.scans < after_writes + 2 {
            assert!(
                !finishes_within(Duration::from_millis(50), source.next()),
                "an unchanged set was emitted"
            );
        }

        // ...and the source still works after a cancelled next().
        fs::write(dir.join("db.yaml"), pod_yaml("db", "postgres:16")).unwrap();
        assert_eq!(
            names(&within(SOON, source.next())),
            ["db-edge-1", "web-edge-1"]
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_watcher_copes_with_the_directory_appearing_and_being_recreated() {
        let dir = temp_dir("late");
        let mut source = FileSource::new(dir.clone(), NODE.into(), LONG);
        assert!(
            within(SOON, source.next()).pods.is_empty(),
            "missing directory, empty set"
        );

        // Created later, with a manifest: seen through the parent watch.
        let staging = temp_dir("late-staging");
        fs::create_dir_all(&staging).unwrap();
        fs::write(staging.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        fs::rename(&staging, &dir).unwrap();
        assert_eq!(names(&within(SOON, source.next())), ["web-edge-1"]);

        // Deleted: the set empties.
        fs::remove_dir_all(&dir).unwrap();
        assert!(within(SOON, source.next()).pods.is_empty());

        // Recreated: the watch comes back and new files are seen.
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("db.yaml"), pod_yaml("db", "postgres:16")).unwrap();
        let update = within(SOON, source.next());
        let update = if update.pods.is_empty() {
            within(SOON, source.next())
        } else {
            update
        };
        assert_eq!(names(&update), ["db-edge-1"]);
        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        assert_eq!(
            names(&within(SOON, source.next())),
            ["db-edge-1", "web-edge-1"]
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_is_settled_once_closed_after_writing_moved_or_deleted() {
        use ReadFlags as F;
        let f = |n: &str| OsString::from(n);
        // (events, settled afterwards)
        let table: &[(&[(ReadFlags, &str)], bool)] = &[
            (&[], true),
            (&[(F::MOVED_TO, "a.yaml")], true),
            (&[(F::CREATE, "a.yaml")], false),
            (&[(F::CREATE, "a.yaml"), (F::MODIFY, "a.yaml")], false),
            (&[(F::CREATE, "a.yaml"), (F::CLOSE_WRITE, "a.yaml")], true),
            (&[(F::MODIFY, "a.yaml"), (F::DELETE, "a.yaml")], true),
            (&[(F::MODIFY, "a.yaml"), (F::MOVED_FROM, "a.yaml")], true),
            // One file closed, another still open.
            (
                &[
                    (F::CREATE, "a.yaml"),
                    (F::CREATE, "b.yaml"),
                    (F::CLOSE_WRITE, "a.yaml"),
                ],
                false,
            ),
            // A subdirectory is not a writer.
            (&[(F::CREATE | F::ISDIR, "sub")], true),
            (&[(F::ATTRIB, "a.yaml")], true),
        ];
        for (events, settled) in table {
            let mut w = OpenWrites::default();
            for (flags, name) in *events {
                w.apply(*flags, &f(name));
            }
            assert_eq!(w.settled(), *settled, "{events:?}");
        }
    }

    #[test]
    fn past_its_bound_or_after_lost_events_the_record_waits_for_quiet() {
        let mut w = OpenWrites::default();
        for i in 0..=OpenWrites::CAP {
            w.apply(ReadFlags::CREATE, &OsString::from(format!("{i}.yaml")));
        }
        for i in 0..=OpenWrites::CAP {
            w.apply(ReadFlags::CLOSE_WRITE, &OsString::from(format!("{i}.yaml")));
        }
        assert!(!w.settled(), "an untracked file may still be open");
        assert!(w.names.len() <= OpenWrites::CAP);
        w.forget();
        assert!(w.settled());
        w.lose_track();
        assert!(!w.settled());
    }

    #[test]
    fn the_periodic_rescan_works_without_inotify() {
        let dir = temp_dir("poll");
        fs::create_dir_all(&dir).unwrap();
        let mut source = FileSource::new(dir.clone(), NODE.into(), Duration::from_millis(50));
        source.inotify = None;
        assert!(within(SOON, source.next()).pods.is_empty());
        fs::write(dir.join("web.yaml"), pod_yaml("web", "nginx:1")).unwrap();
        assert_eq!(names(&within(SOON, source.next())), ["web-edge-1"]);
        let _ = fs::remove_dir_all(&dir);
    }
}
