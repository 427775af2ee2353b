//! `embed_migrations!` reads `migrations/` when this crate compiles, but a proc macro
//! cannot tell Cargo to watch a directory: a newly added migration would otherwise be
//! missing from a binary built before it (diesel's documentation recommends this script).
//!
//! It also writes `migration_scripts.rs` into `OUT_DIR`: each migration's name with its
//! `up.sql`, which `src/migration_script.rs` runs one statement at a time (diesel's
//! embedded migrations keep their text private).

use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"))
        .join("../../migrations");
    let mut names: Vec<String> = fs::read_dir(&root)
        .expect("the migrations directory")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("up.sql").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut table = String::from("&[\n");
    for name in &names {
        let up = root.join(name).join("up.sql");
        println!("cargo:rerun-if-changed={}", up.display());
        table.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            up.canonicalize().expect("up.sql").display().to_string()
        ));
    }
    table.push_str("]\n");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("migration_scripts.rs");
    fs::write(out, table).expect("writing migration_scripts.rs");
}
