//! `embed_migrations!` reads `migrations/` when this crate compiles, but a proc macro
//! cannot tell Cargo to watch a directory: a newly added migration would otherwise be
//! missing from a binary built before it (diesel's documentation recommends this script).

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
