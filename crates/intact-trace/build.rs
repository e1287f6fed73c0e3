// Builds the LD_PRELOAD shim (no tail calls: the converter recognises shim-attributed
// calls by the shim frame on the native stack, which a tail call would remove) (../../shim/intact_preload.c) into OUT_DIR; the tracer
// embeds the bytes and writes them next to the bundle at record time, so the `intact`
// binary is self-contained.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    // The manifest directory at run time: `env!` would bake in wherever this build script
    // was first compiled, and a cached build script then points at a stale checkout.
    let src =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../../shim/intact_preload.c");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=INTACT_SHIM_SOURCE");
    // Developers may build against another copy of the shim.
    let src = std::env::var_os("INTACT_SHIM_SOURCE")
        .map(PathBuf::from)
        .unwrap_or(src);
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("libintact_preload.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-g",
            "-Wall",
            "-fno-optimize-sibling-calls",
            "-fno-omit-frame-pointer",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .args(["-ldl", "-lpthread"])
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("building the LD_PRELOAD shim with {cc} failed ({s}); install a C compiler (apt-get install -y gcc)"),
        Err(e) => panic!("cannot run the C compiler {cc:?} to build the LD_PRELOAD shim: {e}; install one (apt-get install -y gcc)"),
    }
}
