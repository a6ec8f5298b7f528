//! A fault-injecting TCP proxy for integration tests -- owned by the test
//! harness (tests/harness).
//!
//! It sits between picolet and the API server (or anything else that speaks
//! TCP) and, on command, misbehaves the way a bad uplink does: it refuses new
//! connections, goes silent without closing anything (a blackhole), adds
//! latency, throttles, resets every live connection mid-stream, or cuts the
//! server's reply after N bytes. It forwards bytes and never looks into them:
//! TLS passes through untouched, so the client still verifies the API
//! server's certificate (whose SANs include 127.0.0.1, where the proxy
//! listens).
//!
//! Plain std threads: one acceptor, and per connection one thread per
//! direction. Sockets use short read/write timeouts so every thread notices
//! a command within about [`TICK`]; nothing here sleeps to prove anything.
//! Counters (connections accepted, bytes each way) let a test or the bench
//! tell how much a client sent and received to recover from a fault. On
//! request it also notes each TLS record's size, direction and time (the
//! 5-byte record headers are all it reads), so a byte count can be taken
//! apart into renewals, watch events and pings.
//!
//! It knows nothing of HTTP, Kubernetes or picolet. Its sibling [`tls`]
//! terminates TLS to cut or corrupt what a watch stream carries.

pub mod tls;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often a blocked proxy thread looks at its commands.
const TICK: Duration = Duration::from_millis(50);
/// How long a command that waits for the proxy's threads may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);
/// Upper bound for the proxy's own connect to the upstream.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const BUF: usize = 16 * 1024;

/// What the proxy does with connections, set by the commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Forward everything.
    Pass,
    /// Close the listening socket: new connections are refused
    /// (ECONNREFUSED); live ones keep working.
    DropNew,
    /// Accept, but forward nothing in either direction and close nothing.
    Blackhole,
}

/// Counters since start (or since [`FaultProxy::reset_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted and handed to the upstream.
    pub accepted: u64,
    /// Connections open right now.
    pub live: u64,
    /// Bytes forwarded client -> upstream.
    pub bytes_up: u64,
    /// Bytes forwarded upstream -> client.
    pub bytes_down: u64,
    /// Connections ended with a RST by [`FaultProxy::reset_all`].
    pub resets: u64,
}

/// One TLS record forwarded, as [`FaultProxy::records`] lists it.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    /// When its last byte was forwarded.
    pub at: Instant,
    /// Client to upstream.
    pub up: bool,
    /// Its size with the 5-byte header.
    pub bytes: usize,
}

/// Finds the TLS records in one direction's bytes: a 5-byte header whose
/// last two bytes are the length of what follows.
#[derive(Default)]
struct RecordSplitter {
    head: [u8; 5],
    have: usize,
    left: usize,
}

impl RecordSplitter {
    /// The sizes of the records that `chunk` completes.
    fn feed(&mut self, mut chunk: &[u8]) -> Vec<usize> {
        let mut done = Vec::new();
        while !chunk.is_empty() {
            if self.have < 5 {
                let take = (5 - self.have).min(chunk.len());
                self.head[self.have..self.have + take].copy_from_slice(&chunk[..take]);
                self.have += take;
                chunk = &chunk[take..];
                if self.have == 5 {
                    self.left = u16::from_be_bytes([self.head[3], self.head[4]]) as usize;
                }
            } else {
                let take = self.left.min(chunk.len());
                self.left -= take;
                chunk = &chunk[take..];
            }
            if self.have == 5 && self.left == 0 {
                done.push(5 + u16::from_be_bytes([self.head[3], self.head[4]]) as usize);
                self.have = 0;
            }
        }
        done
    }
}

/// The fault-injecting proxy. Dropping it resets every live connection and
/// stops the listener.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    state: Mutex<State>,
    changed: Condvar,
    accepted: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    resets: AtomicU64,
    /// The records forwarded while [`FaultProxy::note_records`] is on.
    records: Mutex<Option<Vec<Record>>>,
}

struct State {
    mode: Mode,
    delay: Duration,
    /// Bytes per second, per connection and direction; 0 = unlimited.
    throttle: u64,
    /// Server->client byte budget for the next accepted connection.
    truncate_next: Option<u64>,
    /// True while the acceptor holds a bound listening socket.
    listening: bool,
    shutdown: bool,
    next_id: u64,
    conns: HashMap<u64, Arc<Conn>>,
}

/// One proxied connection, as the control side sees it.
struct Conn {
    client: TcpStream,
    server: Mutex<Option<TcpStream>>,
    /// Set to make both pumps drop their sockets now.
    killed: AtomicBool,
    /// Set when the server->client stream was cut by a truncation: the
    /// client->server pump then discards what the client sends.
    cut: AtomicBool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Up,
    Down,
}

impl FaultProxy {
    /// Listens on a free 127.0.0.1 port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fault proxy");
        let addr = listener.local_addr().expect("fault proxy address");
        let shared = Arc::new(Shared {
            upstream,
            state: Mutex::new(State {
                mode: Mode::Pass,
                delay: Duration::ZERO,
                throttle: 0,
                truncate_next: None,
                listening: true,
                shutdown: false,
                next_id: 0,
                conns: HashMap::new(),
            }),
            changed: Condvar::new(),
            accepted: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            records: Mutex::new(None),
            resets: AtomicU64::new(0),
        });
        let s = shared.clone();
        let acceptor = thread::Builder::new()
            .name(format!("faultproxy-{}", addr.port()))
            .spawn(move || accept_loop(s, listener, addr))
            .expect("spawning the fault proxy acceptor");
        FaultProxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// Where clients connect (127.0.0.1:port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The upstream everything is forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// `https://127.0.0.1:<port>`: the API server's URL through the proxy.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Ends every fault: forwards again (data held by a blackhole flows on),
    /// accepts again, no delay, no throttle, no pending truncation. Returns
    /// once the listener is accepting again.
    pub fn pass(&self) {
        {
            let mut st = self.shared.lock();
            st.mode = Mode::Pass;
            st.delay = Duration::ZERO;
            st.throttle = 0;
            st.truncate_next = None;
        }
        self.shared.changed.notify_all();
        self.shared
            .wait_for("the fault proxy to listen again", |st| st.listening);
    }

    /// Refuses new connections (the listening socket is closed, so clients
    /// get ECONNREFUSED); live connections keep flowing. Returns once the
    /// port is closed. [`FaultProxy::pass`] reopens the same port.
    pub fn drop_new(&self) {
        self.set_mode(Mode::DropNew);
        // Wake the acceptor out of accept() so it closes the listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        self.shared
            .wait_for("the fault proxy to close its port", |st| !st.listening);
    }

    /// Accepts new connections but forwards nothing, in either direction,
    /// on new and live connections alike, and closes nothing: what a client
    /// sees when the path to the server silently drops packets. What was
    /// sent meanwhile is delivered after [`FaultProxy::pass`], as TCP's
    /// retransmissions would.
    pub fn blackhole(&self) {
        self.set_mode(Mode::Blackhole);
    }

    /// Holds every chunk of data for `d` before forwarding it (both ways).
    pub fn delay(&self, d: Duration) {
        self.shared.lock().delay = d;
        self.shared.changed.notify_all();
    }

    /// Limits each connection to `bytes_per_sec` in each direction
    /// (0 = unlimited).
    pub fn throttle(&self, bytes_per_sec: u64) {
        self.shared.lock().throttle = bytes_per_sec;
        self.shared.changed.notify_all();
    }

    /// Resets every live connection mid-stream: both of its sockets are
    /// closed with SO_LINGER 0, so the client and the server each get a
    /// RST. Returns the number of connections reset, once they are gone.
    pub fn reset_all(&self) -> usize {
        let conns: Vec<(u64, Arc<Conn>)> = {
            let st = self.shared.lock();
            st.conns.iter().map(|(k, c)| (*k, c.clone())).collect()
        };
        for (_, c) in &conns {
            c.abort();
        }
        self.shared.changed.notify_all();
        self.shared
            .resets
            .fetch_add(conns.len() as u64, Ordering::SeqCst);
        let ids: Vec<u64> = conns.iter().map(|(k, _)| *k).collect();
        self.shared.wait_for("reset connections to close", |st| {
            ids.iter().all(|id| !st.conns.contains_key(id))
        });
        conns.len()
    }

    /// Cuts the next accepted connection's server->client stream after
    /// `bytes`: the client gets those bytes, then an orderly end of stream
    /// (FIN); the proxy closes its connection to the server.
    pub fn truncate_after(&self, bytes: u64) {
        self.shared.lock().truncate_next = Some(bytes);
    }

    /// Starts noting every TLS record forwarded (forgetting earlier ones).
    pub fn note_records(&self) {
        *self
            .shared
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    }

    /// The records noted since [`Self::note_records`], in order.
    pub fn records(&self) -> Vec<Record> {
        self.shared
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// The counters.
    pub fn stats(&self) -> ProxyStats {
        let live = self.shared.lock().conns.len() as u64;
        ProxyStats {
            accepted: self.shared.accepted.load(Ordering::SeqCst),
            live,
            bytes_up: self.shared.bytes_up.load(Ordering::SeqCst),
            bytes_down: self.shared.bytes_down.load(Ordering::SeqCst),
            resets: self.shared.resets.load(Ordering::SeqCst),
        }
    }

    /// Sets the counters (all but `live`) back to zero.
    pub fn reset_stats(&self) {
        for c in [
            &self.shared.accepted,
            &self.shared.bytes_up,
            &self.shared.bytes_down,
            &self.shared.resets,
        ] {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// Waits until at least `n` connections are live; panics after
    /// `timeout`. Returns the stats at that point.
    pub fn wait_live(&self, n: u64, timeout: Duration) -> ProxyStats {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        while (st.conns.len() as u64) < n {
            let now = Instant::now();
            if now >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting for {n} live connections through the fault proxy at {} ({} live)",
                    self.addr,
                    st.conns.len()
                );
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, (deadline - now).min(TICK))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(st);
        self.stats()
    }

    fn set_mode(&self, mode: Mode) {
        self.shared.lock().mode = mode;
        self.shared.changed.notify_all();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let conns: Vec<Arc<Conn>> = {
            let mut st = self.shared.lock();
            st.shutdown = true;
            st.conns.values().cloned().collect()
        };
        for c in conns {
            c.abort();
        }
        self.shared.changed.notify_all();
        // Wake the acceptor (if it listens) so it sees the shutdown.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `done(state)`; panics naming `what` after
    /// [`COMMAND_TIMEOUT`].
    fn wait_for(&self, what: &str, mut done: impl FnMut(&State) -> bool) {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let mut st = self.lock();
        while !done(&st) {
            let now = Instant::now();
            if now >= deadline {
                panic!("fault proxy: timed out after {COMMAND_TIMEOUT:?} waiting for {what}");
            }
            st = self
                .changed
                .wait_timeout(st, (deadline - now).min(TICK))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn mode(&self) -> Mode {
        self.lock().mode
    }

    fn set_listening(&self, listening: bool) {
        self.lock().listening = listening;
        self.changed.notify_all();
    }

    /// Blocks while the proxy is blackholed; false if the connection was
    /// killed (or the proxy stopped) meanwhile.
    fn wait_while_blackholed(&self, conn: &Conn) -> bool {
        let mut st = self.lock();
        loop {
            if conn.killed.load(Ordering::SeqCst) || st.shutdown {
                return false;
            }
            if st.mode != Mode::Blackhole {
                return true;
            }
            st = self
                .changed
                .wait_timeout(st, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Conn {
    /// Makes both sockets close with a RST, and both pumps stop.
    fn abort(&self) {
        let _ = rustix::net::sockopt::set_socket_linger(&self.client, Some(Duration::ZERO));
        if let Some(s) = self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = rustix::net::sockopt::set_socket_linger(s, Some(Duration::ZERO));
        }
        self.killed.store(true, Ordering::SeqCst);
    }

    fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }
}

fn accept_loop(shared: Arc<Shared>, listener: TcpListener, addr: SocketAddr) {
    let mut listener = Some(listener);
    loop {
        // Closed while refusing; reopened (same port) when that ends.
        {
            let mut st = shared.lock();
            while st.mode == Mode::DropNew && !st.shutdown {
                if listener.take().is_some() {
                    st.listening = false;
                    shared.changed.notify_all();
                }
                st = shared
                    .changed
                    .wait_timeout(st, TICK)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if st.shutdown {
                st.listening = false;
                shared.changed.notify_all();
                return;
            }
        }
        let l = match &listener {
            Some(l) => l,
            None => {
                listener = Some(rebind(addr));
                shared.set_listening(true);
                listener.as_ref().unwrap()
            }
        };
        let client = match l.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("fault proxy {addr}: accept: {e}");
                thread::sleep(TICK);
                continue;
            }
        };
        let (id, truncate) = {
            let mut st = shared.lock();
            // A wake-up from a command, or a client that raced drop_new().
            if st.shutdown || st.mode == Mode::DropNew {
                let _ = rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO));
                continue;
            }
            st.next_id += 1;
            (st.next_id, st.truncate_next.take())
        };
        let Ok(control) = client.try_clone() else {
            continue;
        };
        let conn = Arc::new(Conn {
            client: control,
            server: Mutex::new(None),
            killed: AtomicBool::new(false),
            cut: AtomicBool::new(false),
        });
        shared.lock().conns.insert(id, conn.clone());
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        shared.changed.notify_all();
        let s = shared.clone();
        let spawned = thread::Builder::new()
            .name(format!("faultproxy-conn-{id}"))
            .spawn(move || {
                // serve() drops its handles first, so the registry's are the
                // last: a reset is on the wire before the removal is seen.
                serve(&s, conn, client, truncate);
                s.lock().conns.remove(&id);
                s.changed.notify_all();
            });
        if spawned.is_err() {
            shared.lock().conns.remove(&id);
        }
    }
}

/// Binds the proxy's port again after a drop_new().
fn rebind(addr: SocketAddr) -> TcpListener {
    let start = Instant::now();
    loop {
        match TcpListener::bind(addr) {
            Ok(l) => return l,
            Err(_) if start.elapsed() < COMMAND_TIMEOUT => thread::sleep(TICK),
            Err(e) => panic!("fault proxy: cannot listen on {addr} again: {e}"),
        }
    }
}

/// Runs one connection: connects upstream (after any blackhole), then
/// pumps both directions until both ends are done or it is killed.
fn serve(shared: &Arc<Shared>, conn: Arc<Conn>, client: TcpStream, truncate: Option<u64>) {
    if !shared.wait_while_blackholed(&conn) {
        return;
    }
    let server = match TcpStream::connect_timeout(&shared.upstream, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(e) => {
            // The upstream is down: the client gets a RST, as it would.
            eprintln!("fault proxy: connecting to {}: {e}", shared.upstream);
            let _ = rustix::net::sockopt::set_socket_linger(&client, Some(Duration::ZERO));
            return;
        }
    };
    let _ = server.set_nodelay(true);
    let _ = client.set_nodelay(true);
    for s in [&client, &server] {
        let _ = s.set_read_timeout(Some(TICK));
        let _ = s.set_write_timeout(Some(TICK));
    }
    let (Ok(client2), Ok(server2), Ok(control)) =
        (client.try_clone(), server.try_clone(), server.try_clone())
    else {
        return;
    };
    *conn.server.lock().unwrap_or_else(|e| e.into_inner()) = Some(control);
    if conn.is_killed() {
        // reset_all() came between the connect and now: make it a RST too.
        conn.abort();
        return;
    }
    let (s2, c2) = (shared.clone(), conn.clone());
    let down = thread::Builder::new()
        .name("faultproxy-down".into())
        .spawn(move || pump(&s2, &c2, server2, client2, Dir::Down, truncate));
    pump(shared, &conn, client, server, Dir::Up, None);
    if let Ok(t) = down {
        let _ = t.join();
    }
    *conn.server.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Copies `src` to `dst` under the proxy's commands until end of stream,
/// an error (passed on as a RST) or a kill. `limit` is a truncation budget.
fn pump(
    shared: &Shared,
    conn: &Conn,
    mut src: TcpStream,
    mut dst: TcpStream,
    dir: Dir,
    mut limit: Option<u64>,
) {
    let counter = match dir {
        Dir::Up => &shared.bytes_up,
        Dir::Down => &shared.bytes_down,
    };
    let mut buf = vec![0u8; BUF];
    let mut splitter = RecordSplitter::default();
    loop {
        if !shared.wait_while_blackholed(conn) {
            return;
        }
        let n = match src.read(&mut buf) {
            Ok(0) => {
                // Orderly end of stream: pass the half-close on.
                let _ = dst.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                if conn.is_killed() {
                    return;
                }
                continue;
            }
            Err(_) => {
                // The peer reset (or the socket broke): reset the other side.
                conn.abort();
                return;
            }
        };
        if dir == Dir::Up && conn.cut.load(Ordering::SeqCst) {
            continue; // the server side is gone; drain the client
        }
        if !shared.wait_while_blackholed(conn) {
            return;
        }
        let (delay, throttle) = {
            let st = shared.lock();
            (st.delay, st.throttle)
        };
        if !delay.is_zero() && !sleep_unless_killed(conn, delay) {
            return;
        }
        let mut chunk = &buf[..n];
        let mut cut_now = false;
        if let Some(left) = limit.as_mut() {
            let take = (*left).min(chunk.len() as u64) as usize;
            chunk = &chunk[..take];
            *left -= take as u64;
            cut_now = *left == 0;
        }
        // Counted before the write, so a client that has read the bytes
        // always finds them counted.
        counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        let sizes = splitter.feed(chunk);
        if !sizes.is_empty() {
            if let Some(records) = shared
                .records
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_mut()
            {
                let at = Instant::now();
                let up = dir == Dir::Up;
                records.extend(sizes.into_iter().map(|bytes| Record { at, up, bytes }));
            }
        }
        if !write_all(conn, &mut dst, chunk) {
            return;
        }
        if cut_now {
            // Truncated: the client sees end of stream after the budget;
            // the server connection is closed; the other pump drains.
            conn.cut.store(true, Ordering::SeqCst);
            let _ = dst.shutdown(Shutdown::Write);
            let _ = src.shutdown(Shutdown::Both);
            return;
        }
        if throttle > 0 {
            let secs = chunk.len() as f64 / throttle as f64;
            if !sleep_unless_killed(conn, Duration::from_secs_f64(secs)) {
                return;
            }
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Writes all of `data`, retrying on the socket's short timeouts; false if
/// the connection was killed or the write failed (then it is reset).
fn write_all(conn: &Conn, dst: &mut TcpStream, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        if conn.is_killed() {
            return false;
        }
        match dst.write(data) {
            Ok(0) => {
                conn.abort();
                return false;
            }
            Ok(n) => data = &data[n..],
            Err(e) if is_timeout(&e) => continue,
            Err(_) => {
                conn.abort();
                return false;
            }
        }
    }
    true
}

/// Sleeps `d` in ticks; false if the connection was killed meanwhile.
fn sleep_unless_killed(conn: &Conn, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if conn.is_killed() {
            return false;
        }
        let now = Instant::now();
        if now >= end {
            return true;
        }
        thread::sleep((end - now).min(TICK));
    }
}
