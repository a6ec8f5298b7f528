//! The `picolet-hollow` command: N simulated nodes in one process, for the
//! fleet test and the fleet bench (src/hollow, issue #24). Built only with
//! the `hollow` feature.
//!
//! A binary of its own rather than a subcommand of `picolet`: a build of
//! the shipped feature set writes `target/<profile>/picolet` too, and CI
//! runs such builds beside the fleet test (the power-cut lane's), so a
//! `picolet hollow` could be swapped under the test for a `picolet`
//! without the feature. Nothing but a `hollow` build writes this file.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match picolet::hollow::parse(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(e) => return fail(&e),
    };
    if args.help {
        print!("{}", picolet::hollow::USAGE);
        return ExitCode::SUCCESS;
    }
    match picolet::hollow::run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(e: &picolet::hollow::HollowError) -> ExitCode {
    eprintln!("picolet-hollow: {}", picolet::cli::error_line(e));
    ExitCode::FAILURE
}
