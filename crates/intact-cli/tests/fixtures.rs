//! Small C fixtures, one per family of system calls: the expected logical operations
//! are asserted exactly, and the replay oracle must hold on each.

mod common;
use common::*;

#[test]
fn basic_family() {
    let r = record_c("basic", |_| {});
    assert_ops(
        &r,
        &[
            "mkdir d",
            "create d/a",
            "append d/a 0->6 \"hello\\n\"",
            "append d/a 6->10 \"abcd\"",
            "overwrite d/a @3 \"XY\"",
            "truncate d/a 10->20",
            "append d/a 20->21 \"Z\"",
            "fsync d/a",
            "rename d/a=>d/b",
            "link d/b=>d/c n=2",
            "unlink d/b n=1",
            "symlink d/s->c",
            "output \"Done\\n\"",
        ],
    );
    // Source locations: every operation names this fixture's source file and main().
    for op in r.ops_json() {
        let loc = &op["loc"];
        assert!(
            loc["file"]
                .as_str()
                .unwrap_or("")
                .ends_with("fixtures/basic.c"),
            "{op}"
        );
        assert_eq!(loc["function"], "main");
        assert!(loc["line"].as_u64().unwrap() > 10);
    }
}
