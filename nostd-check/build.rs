fn main() {
    // No std means no crt startup from Rust: link libc, whose _start calls our `main`.
    println!("cargo:rustc-link-arg-bins=-lc");
}
