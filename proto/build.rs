//! Generates the CRI client from the hand-written subset of cri-api in `proto/`.
//! Only message and client code: no server, no tonic transport.

//! Also stamps the build time (`PICOLET_BUILD_UNIX`, unix seconds;
//! `SOURCE_DATE_EPOCH` when set, for reproducible builds): `picolet check`
//! fails a clock set before the year picolet was built.

fn main() {
    println!("cargo:rerun-if-changed=proto");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let built = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        });
    println!("cargo:rustc-env=PICOLET_BUILD_UNIX={built}");
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .compile_protos(&["proto/runtime/v1/api.proto"], &["proto"])
        .unwrap_or_else(|e| panic!("compiling proto/runtime/v1/api.proto: {e}"));
}
