// The linker scripts of this crate: flash and RAM of a small Cortex-M4F (link.x) for the programs
// that are measured, of the emulated MPS2 board (qemu.x) for the one QEMU runs; the sections
// (sections.x: a vector table, no heap) are the same.
const MEASURED: [&str; 4] = ["firmware", "firmware_borrowed", "baseline", "async_client"];
const EMULATED: [&str; 1] = ["qemu"];

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:rustc-link-search={dir}");
    for bin in MEASURED {
        println!("cargo:rustc-link-arg-bin={bin}=-Tlink.x");
    }
    for bin in EMULATED {
        println!("cargo:rustc-link-arg-bin={bin}=-Tqemu.x");
    }
    for script in ["link.x", "qemu.x", "sections.x"] {
        println!("cargo:rerun-if-changed={script}");
    }
}
