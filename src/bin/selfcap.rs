//! `selfcap`: the command-line client for Self Capsule. The whole program is
//! the library's `self_capsule::cli::run` (native only); this is its
//! process entry point.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    std::process::exit(self_capsule::cli::run(std::env::args_os()));
}

#[cfg(target_arch = "wasm32")]
fn main() {
    // The CLI is native only; this keeps a wasm build of every target quiet.
}
