//! Links the `zi` binary as a position-dependent executable on Linux (docs/performance.md,
//! "Start-up and idle memory").
//!
//! A position-independent `zi` carries ~30,000 relative relocations: the dynamic loader writes
//! each one at every start, which dirties every page of `.data.rel.ro` (vtables, panic
//! locations, static string tables) — about 0.5 MiB of private memory per process and ~130
//! copy-on-write page faults before `main`. Linked at a fixed address, those pages stay clean
//! file pages that every `zi` process shares. The shared libraries, the heap, the stacks and
//! the mappings keep their address randomization; only the executable's own image is at a fixed
//! address.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=zi=-no-pie");
    }
}
