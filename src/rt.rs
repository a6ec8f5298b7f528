//! The runtime: one `smol::LocalExecutor` per process, and the glue that lets
//! hyper run on it.
//!
//! picolet runs every loop (pod workers, PLEG, probes, the admin socket, the
//! CRI connection) as a task on a single thread-local executor. Tasks are
//! `!Send` and share state through `Rc<RefCell<_>>`; nothing here spawns a
//! thread. `async-io` starts its one reactor thread, which waits on epoll and
//! wakes this one (see [`block_on`] for why it, and not this thread, drives the
//! reactor), so the process stays within the budget of three threads.
//!
//! hyper is runtime-agnostic: it needs an [`Executor`](hyper::rt::Executor) to
//! drive HTTP/2 connection futures, a [`Timer`](hyper::rt::Timer) for
//! keep-alive PINGs, and byte streams implementing its own `Read`/`Write`.
//! [`LocalExec`], [`SmolTimer`] and [`Io`] provide those on top of smol.
//!
//! The starvation watchdog lives here too: every task's polls are timed, a
//! poll over [`SLOW_POLL`] is logged with the place the task was spawned,
//! and the longest one is kept for `/metrics`.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use smol::io::{AsyncRead, AsyncWrite};
use smol::{LocalExecutor, Task};

thread_local! {
    static EXECUTOR: LocalExecutor<'static> = const { LocalExecutor::new() };
}

/// A poll that holds the thread longer than this is logged with the place
/// its task was spawned: on one thread, it stalled every probe, the PLEG and
/// the admin socket meanwhile.
pub const SLOW_POLL: Duration = Duration::from_millis(100);

thread_local! {
    /// The longest single poll of any task so far, and where that task was
    /// spawned.
    static LONGEST_POLL: Cell<(Duration, Option<&'static Location<'static>>)> =
        const { Cell::new((Duration::ZERO, None)) };
}

/// The longest time one poll of one task held the executor, and where that
/// task was spawned (`picolet_executor_longest_poll_seconds`).
pub fn longest_poll() -> (Duration, Option<&'static Location<'static>>) {
    LONGEST_POLL.with(Cell::get)
}

/// Spawns a task on this thread's executor. Every poll of it is timed (two
/// clock reads): see [`SLOW_POLL`] and [`longest_poll`].
#[track_caller]
pub fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> Task<T> {
    let at = Location::caller();
    EXECUTOR.with(|ex| ex.spawn(Watched { inner: future, at }))
}

/// A task's future, timed at every poll.
struct Watched<F> {
    inner: F,
    at: &'static Location<'static>,
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let at = self.at;
        // SAFETY: `inner` is never moved out of the pinned `Watched`.
        let inner = unsafe { self.map_unchecked_mut(|w| &mut w.inner) };
        let start = Instant::now();
        let out = inner.poll(cx);
        let took = start.elapsed();
        LONGEST_POLL.with(|l| {
            if took > l.get().0 {
                l.set((took, Some(at)));
            }
        });
        if took > SLOW_POLL {
            log::warn!(
                "a task spawned at {}:{} held the executor for {} ms",
                at.file(),
                at.line(),
                took.as_millis()
            );
        }
        out
    }
}

/// Runs `future` to completion, driving every spawned task meanwhile.
///
/// The executor runs under `futures_lite`'s plain `block_on`, not
/// `async_io::block_on`, so the reactor is always driven by async-io's own
/// thread and this thread only parks and polls. `async_io::block_on` lets
/// the blocked thread drive the reactor itself, but once it wakes for an
/// event the async-io thread takes the reactor over and, while a
/// `block_on` is active, polls it with a back-off of ten timed sleeps
/// (50 µs .. 10 ms) after every tick: at one relist a second that was
/// about a quarter of picolet's idle CPU. Measured with `make bench`, 30
/// static pods on containerd 1.6, same run: 0.070 → 0.050 s CPU per idle
/// minute (0.040 → 0.030 with no pods), start time unchanged within the
/// noise. The cost is one cross-thread wake-up per event burst, which the
/// old path paid too once the async-io thread held the reactor.
pub fn block_on<T>(future: impl Future<Output = T>) -> T {
    EXECUTOR.with(|ex| smol::future::block_on(ex.run(future)))
}

/// Sleeps on the reactor's timer.
pub async fn sleep(duration: Duration) {
    smol::Timer::after(duration).await;
}

mod grid;

pub use grid::{on_grid, sleep_on_grid, sleep_until_on_grid, GridSleep, TICK_GRID};

/// Runs `future` with a deadline; `None` when the deadline passed first.
/// The deadline counts from this call (every caller awaits it at once).
///
/// A plain [`Timeout`] future, not an `async fn`: an `async fn` that takes a
/// future and awaits it keeps both the argument and the future it awaits in
/// its state, and the `or` of two async blocks did it once more, so every
/// call under a timeout (each CRI call, hooks, probes) took three times its
/// own size: 50 KB for a CreateContainer, 110 KB per pod starting at once,
/// 12 MiB with 110 pods (issue #8's memory budget).
///
/// The deadline waits on the grid ([`sleep_until_on_grid`]), so it may
/// end up to one [`TICK_GRID`] late. A deadline is nearly always dropped
/// long before it is due (a pod worker's wait for its next sync, every
/// API and CRI call); on async-io's own timer each one woke the reactor
/// thread twice, at its insert and at its removal, where a grid sleeper
/// later than the shared timer's tick costs a map insert and removal on
/// this thread (docs/fleet.md measures it).
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        timer: sleep_until_on_grid(Instant::now() + duration),
    }
}

/// The future of [`timeout`]: the inner future first, then the deadline.
pub struct Timeout<F> {
    future: F,
    timer: GridSleep,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is never moved out of the pinned `Timeout` (it is
        // only polled in place); `timer` is `Unpin`.
        let this = unsafe { self.get_unchecked_mut() };
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(out) = future.poll(cx) {
            return Poll::Ready(Some(out));
        }
        match Pin::new(&mut this.timer).poll(cx) {
            Poll::Ready(_) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// hyper's executor: spawns connection futures on the thread-local executor.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: Future + 'static,
{
    #[track_caller]
    fn execute(&self, future: F) {
        spawn(future).detach();
    }
}

/// hyper's timer, on the grid of [`sleep_until_on_grid`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SmolTimer;

/// hyper's sleeps wait on the grid (up to one [`TICK_GRID`] late): the
/// HTTP/2 keep-alive timer is reset at every read of the connection, and
/// on async-io's timer each reset woke its reactor thread twice (see
/// [`timeout`]).
struct Sleep(GridSleep);

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for Sleep {}

impl hyper::rt::Timer for SmolTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(sleep_until_on_grid(Instant::now() + duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(Sleep(sleep_until_on_grid(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        *sleep = self.sleep_until(new_deadline);
    }
}

/// The most one read of an [`Io`] asks for: h2 reads into an 8 KiB
/// buffer and a TLS record is at most 16 KiB, so a busy stream still reads
/// a frame or two per call.
const READ_CHUNK: usize = 8 * 1024;

/// Adapts a futures-io byte stream (smol's `Async<UnixStream>`, a TLS
/// stream, ...) to hyper's I/O traits.
#[derive(Debug)]
pub struct Io<T>(pub T);

impl<T: AsyncRead + Unpin> hyper::rt::Read for Io<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // A read asks for at most READ_CHUNK bytes, and that part of the
        // buffer is zeroed first (`AsyncRead` takes initialised bytes).
        // hyper hands over the whole spare buffer uninitialised at every
        // call, also the one that ends in Pending; zeroing all of it byte by
        // byte was 2 % of an idle hollow fleet's CPU (`perf`, docs/fleet.md).
        // SAFETY: the slice is zeroed before use, so no uninitialised byte is
        // ever read; `advance` only counts the bytes the reader wrote.
        let unfilled = unsafe { buf.as_mut() };
        let len = unfilled.len().min(READ_CHUNK);
        let unfilled = &mut unfilled[..len];
        unsafe { std::ptr::write_bytes(unfilled.as_mut_ptr(), 0, len) };
        let slice = unsafe { &mut *(unfilled as *mut [std::mem::MaybeUninit<u8>] as *mut [u8]) };
        match Pin::new(&mut self.0).poll_read(cx, slice) {
            Poll::Ready(Ok(n)) => {
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for Io<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    /// With vectored writes, h2 chains a DATA payload of over 256 bytes
    /// behind its buffered frames instead of copying it into its buffer
    /// (1 KiB without), and both go out in one write: one TLS record, or
    /// one `writev` on the CRI socket. Every stream picolet wraps
    /// (futures-rustls, async-io's sockets) writes vectors as a whole.
    /// (A request's HEADERS and its DATA still leave in two flushes:
    /// hyper hands the body over after the headers went out.)
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_returns_none_when_the_future_is_slower() {
        let r = block_on(timeout(
            Duration::from_millis(10),
            sleep(Duration::from_secs(5)),
        ));
        assert!(r.is_none());
    }

    #[test]
    fn a_timeout_returns_the_output_of_a_future_that_finishes_first() {
        let r = block_on(timeout(Duration::from_secs(60), async { 7 }));
        assert_eq!(r, Some(7));
    }

    #[test]
    fn a_timeout_is_no_bigger_than_its_future_and_a_timer() {
        let inner = async {
            let big = [0u8; 4096];
            sleep(Duration::from_millis(1)).await;
            big.len()
        };
        let inner_size = std::mem::size_of_val(&inner);
        let t = timeout(Duration::from_secs(1), inner);
        assert!(
            std::mem::size_of_val(&t) <= inner_size + std::mem::size_of::<smol::Timer>() + 16,
            "{} vs {inner_size}",
            std::mem::size_of_val(&t)
        );
        assert_eq!(block_on(t), Some(4096));
    }

    #[test]
    fn spawned_tasks_run_on_the_same_thread() {
        let me = std::thread::current().id();
        let id = block_on(spawn(async { std::thread::current().id() }));
        assert_eq!(me, id);
    }

    mod watchdog {
        use super::*;

        #[test]
        fn a_task_that_holds_the_thread_is_measured_with_where_it_was_spawned() {
            let line = line!() + 2;
            block_on(async {
                spawn(async { std::thread::sleep(Duration::from_millis(5)) }).await;
            });
            let (took, at) = longest_poll();
            assert!(took >= Duration::from_millis(5));
            let at = at.expect("the spawning place");
            assert_eq!((at.file(), at.line()), (file!(), line));
        }
    }
}
