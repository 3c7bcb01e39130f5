//! Embeds every shipped scenario (`../scenarios/*.ron`) so the server can run them from any
//! working directory.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "ron"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from(
        "/// Shipped scenario files: (file name, text).\npub const SHIPPED: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_name().expect("a file").to_string_lossy();
        let path = f.canonicalize().expect("readable").display().to_string();
        writeln!(out, "    ({name:?}, include_str!({path:?})),").expect("write to a String");
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("shipped.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
