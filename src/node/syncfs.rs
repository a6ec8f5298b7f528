//! Making a filesystem's written data durable (`syncfs(2)`) without
//! holding the executor: the agent asks it of the runtime's image
//! filesystem after every pull.
//!
//! Why: containerd unpacks a pulled or imported image's layers through the
//! page cache and does not sync them, while its metadata database is synced
//! at once. A power cut inside the kernel's writeback window (about 30 s)
//! leaves an image that the runtime lists as present with empty files in
//! it. Seen on the qemu board image on 2026-12-06: a 0-byte `/pause` after
//! a cut, and every sandbox of every pod died at start, on every boot
//! after, with nothing on the node able to repair it. kubelet leaves this
//! to the runtime; one `syncfs` per pull closes the window to the time the
//! sync takes.
//!
//! `syncfs` blocks until the device has the data: seconds on an SD card.
//! It runs on a thread of its own that lives only for the call, one at a
//! time (a second caller waits for the first), so the process stays within
//! its three threads: the executor's, async-io's reactor, and this one.
//!
//! It must not know pods, images or the runtime: it is given a path.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

thread_local! {
    /// One sync at a time per executor (see the module docs).
    static ONE_AT_A_TIME: Rc<smol::lock::Mutex<()>> = Rc::new(smol::lock::Mutex::new(()));
    /// The syncs done so far, for tests.
    static DONE: Cell<u64> = const { Cell::new(0) };
}

/// Syncs the filesystem that holds `path` to its device. The executor
/// keeps running meanwhile; the future ends when the kernel says the data
/// is on the device, or with the error of opening `path` or of the call.
pub async fn syncfs(path: &Path) -> io::Result<()> {
    let lock = ONE_AT_A_TIME.with(Rc::clone);
    let _one = lock.lock().await;
    let path: PathBuf = path.to_path_buf();
    let (tx, rx) = smol::channel::bounded(1);
    std::thread::Builder::new()
        .name("picolet-syncfs".into())
        .spawn(move || {
            let _ = tx.send_blocking(sync_now(&path));
        })?;
    let result = rx.recv().await.unwrap_or_else(|_| {
        Err(io::Error::other(
            "the syncfs thread ended without an answer",
        ))
    });
    DONE.with(|d| d.set(d.get() + 1));
    result
}

/// How many syncs this executor has done.
pub fn done() -> u64 {
    DONE.with(Cell::get)
}

fn sync_now(path: &Path) -> io::Result<()> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::fs::syncfs(&fd)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_of_a_directory_s_filesystem_returns_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("layer"), b"data").unwrap();
        let before = done();
        crate::rt::block_on(syncfs(dir.path())).unwrap();
        assert_eq!(done(), before + 1);
    }

    #[test]
    fn a_missing_path_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = crate::rt::block_on(syncfs(&dir.path().join("absent"))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
