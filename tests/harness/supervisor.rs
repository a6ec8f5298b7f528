//! The two-process shape of the long-running drivers (`make demo-cluster`,
//! `make conformance`): the process `make` started supervises a worker in
//! a process group of its own, so Ctrl-C reaches the worker alone and the
//! worker tears down what it started (runtimes, control plane, node)
//! before it exits.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Waits for SIGINT or SIGTERM on a thread of its own and runs `on_signal`
/// for each.
pub fn on_signals(on_signal: impl Fn() + Send + 'static) {
    let mut signals =
        async_signal::Signals::new([async_signal::Signal::Int, async_signal::Signal::Term])
            .expect("signal handlers");
    std::thread::spawn(move || {
        smol::block_on(async {
            use smol::stream::StreamExt;
            while signals.next().await.is_some() {
                on_signal();
            }
        })
    });
}

/// Runs this executable again as the worker (`worker_env` set in its
/// environment) in its own process group, forwards SIGINT and SIGTERM to it
/// as SIGINT, and exits as it does. `what` names the driver in messages.
pub fn supervise(worker_env: &str, what: &str) -> ! {
    let me = std::env::current_exe().expect("the driver's own path");
    let mut worker = Command::new(me)
        .env(worker_env, "1")
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("starting the {what} worker: {e}"));
    let pid = rustix::process::Pid::from_raw(worker.id() as i32).expect("worker pid");
    on_signals(move || {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
    });
    let status = worker
        .wait()
        .unwrap_or_else(|e| panic!("waiting for the {what} worker: {e}"));
    std::process::exit(status.code().unwrap_or(1));
}
