//! `grpc-health-server`: the entrypoint of the integration tests' image
//! `docker.io/picolet/grpc-health:test`, a target for picolet's gRPC probes.
//!
//! Built as the cargo example `grpc_health_server` (so it reuses picolet's
//! own hyper/prost/smol and costs the picolet binary nothing) and linked
//! statically by `tests/images/build-images.sh`. The image holds only this
//! binary, so it is multi-call: the subcommands that flip the health state
//! are what a test runs with CRI exec.
//!
//! ```text
//! grpc-health-server [serve] [--port N] [SERVICE...]   (default port 50051)
//! grpc-health-server not-serving    creates /tmp/not-serving: NOT_SERVING
//! grpc-health-server serving        removes it: SERVING again
//! ```
//!
//! The server itself is `server.rs` beside this file, which picolet's unit
//! tests also include.

use std::net::{Ipv6Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;

use smol::Async;

/// The server refers to the runtime glue as `crate::rt`, in picolet and here.
mod rt {
    pub use picolet::rt::*;
}
mod server;

const NOT_SERVING_FILE: &str = "/tmp/not-serving";
const DEFAULT_PORT: u16 = 50051;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = PathBuf::from(NOT_SERVING_FILE);
    match args.first().map(String::as_str) {
        Some("not-serving") => match std::fs::write(&file, b"") {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(&format!("creating {}: {e}", file.display())),
        },
        Some("serving") => match std::fs::remove_file(&file) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ExitCode::SUCCESS,
            Err(e) => fail(&format!("removing {}: {e}", file.display())),
        },
        Some("-h" | "--help") => {
            println!(
                "usage: grpc-health-server [serve] [--port N] [SERVICE...] | not-serving | serving"
            );
            ExitCode::SUCCESS
        }
        Some("serve") => serve(&args[1..], file),
        _ => serve(&args, file),
    }
}

fn serve(args: &[String], not_serving_file: PathBuf) -> ExitCode {
    let mut port = DEFAULT_PORT;
    let mut services = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--port" {
            match it.next().and_then(|p| p.parse().ok()) {
                Some(p) => port = p,
                None => return fail("--port needs a port number"),
            }
        } else {
            services.push(a.clone());
        }
    }
    // Dual-stack where IPv6 exists, IPv4 otherwise.
    let listener = TcpListener::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))));
    let listener = match listener.and_then(Async::new) {
        Ok(l) => l,
        Err(e) => return fail(&format!("listening on port {port}: {e}")),
    };
    eprintln!(
        "grpc-health: serving grpc.health.v1.Health on port {port}; services: \"\" {services:?}"
    );
    let config = server::Config {
        not_serving_file,
        services,
    };
    match rt::block_on(server::serve(listener, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("accept: {e}")),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("grpc-health: {msg}");
    ExitCode::FAILURE
}
