//! Generates the CRI client from the hand-written subset of cri-api in `proto/`.
//! Only message and client code: no server, no tonic transport.

fn main() {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_protos(&["proto/runtime/v1/api.proto"], &["proto"])
        .unwrap_or_else(|e| panic!("compiling proto/runtime/v1/api.proto: {e}"));
}
