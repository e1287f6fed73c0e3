//! The default build has no FUSE over io_uring (the vendored fuser's `uring` feature, off
//! by default): `-o uring` fails at once with a message naming the feature, and the
//! io-uring crate is not in the default dependency graph. fs_uring.rs tests the feature.
#![cfg(not(feature = "uring"))]

mod common;
use common::intact;
use std::path::Path;
use std::process::Command;

#[test]
fn uring_option_without_the_feature_names_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    // Checked before the image is opened: neither needs to exist, nor root.
    let o = intact()
        .args(["fs", "mount"])
        .arg(tmp.path().join("img"))
        .arg(tmp.path().join("mnt"))
        .args(["--daemon", "-o", "uring"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "an input error: {err}");
    assert!(err.contains("`uring` cargo feature"), "{err}");
    assert!(err.contains("--features uring"), "{err}");
}

/// `cargo tree` of the CLI's normal dependencies, with `features` (not `--offline`: on a
/// fresh machine io-uring may not be downloaded yet, as the default build does not need it).
fn dependency_tree(features: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let o = Command::new(cargo)
        .args(["tree", "-e", "normal", "--prefix", "none"])
        .arg("--manifest-path")
        .arg(&manifest)
        .args(features)
        .output()
        .expect("running cargo tree");
    assert!(
        o.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn io_uring_crate_is_built_only_with_the_feature() {
    let has = |t: &str| t.lines().any(|l| l.starts_with("io-uring "));
    assert!(!has(&dependency_tree(&[])), "io-uring in the default build");
    // The negative space: the check would see it if it were there.
    assert!(
        has(&dependency_tree(&["--features", "uring"])),
        "io-uring missing with --features uring"
    );
}
