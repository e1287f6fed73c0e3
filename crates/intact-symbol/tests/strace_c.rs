//! End-to-end: compile C programs, trace them with `strace -f -k`, resolve.

mod common;

use common::*;
use intact_symbol::{AddressKind, Frame, FrameFilter, RawFrame, Symbolizer, SymbolizerOptions};

const LIB_C: &str = r#"#include <unistd.h>

void foo_write(int fd)
{
    write(fd, "lib\n", 4); /* MARK:lib_write */
}
"#;

const MAIN_C: &str = r#"#include <unistd.h>

void foo_write(int fd);

__attribute__((noinline)) void app_write(int fd)
{
    write(fd, "app\n", 4); /* MARK:app_write */
}

int main(void)
{
    app_write(1); /* MARK:call_app */
    foo_write(1); /* MARK:call_lib */
    return 0;
}
"#;

const INLINE_C: &str = r#"#include <unistd.h>

volatile long sink;

static inline __attribute__((always_inline)) void inl_write(int fd)
{
    sink = write(fd, "inl\n", 4); /* MARK:inl_write */
}

__attribute__((noinline)) void outer(int fd)
{
    inl_write(fd); /* MARK:outer_call */
    sink += 1;
}

int main(int argc, char **argv)
{
    (void)argv;
    outer(argc); /* MARK:main_call */
    return 0;
}
"#;

/// Builds libfoo.so and an executable `exe` linked against it.
fn build_app(w: &Work, exe: &str, exe_flags: &[&str], debug: bool) -> std::path::PathBuf {
    w.write("libfoo.c", LIB_C);
    w.write("main.c", MAIN_C);
    let g = if debug { "-g" } else { "-g0" };
    let libname = format!("lib{exe}foo.so");
    w.compile(
        "gcc",
        &[g, "-O0", "-fPIC", "-shared", "-o", &libname, "libfoo.c"],
    );
    let dir = w.dir.path().to_str().unwrap().to_string();
    let rpath = format!("-Wl,-rpath,{dir}");
    let lib = format!("-l{exe}foo");
    let mut args: Vec<&str> = vec![g, "-O0"];
    args.extend_from_slice(exe_flags);
    args.extend_from_slice(&["-o", exe, "main.c", "-L.", &lib, &rpath]);
    w.compile("gcc", &args);
    w.path(exe)
}

fn find_fn<'a>(stack: &'a [Frame], f: &str) -> &'a Frame {
    stack
        .iter()
        .find(|fr| fr.function.as_deref() == Some(f))
        .unwrap_or_else(|| panic!("no frame for {f} in {stack:#?}"))
}

fn check_debug_app(exe_flags: &[&str], exe: &str) {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    let exe_path = build_app(&w, exe, exe_flags, true);
    let stacks = w.strace(&exe_path, &[]);
    let mut sym = Symbolizer::new();
    let filter = FrameFilter::new(&[]).unwrap();

    // The executable's own write.
    let app = stack_with(&stacks, r#""app\n""#);
    let resolved = sym.resolve_stack(&app.frames);
    let sel = filter.select(&resolved).expect("selected frame");
    assert_eq!(sel.function.as_deref(), Some("app_write"), "{resolved:#?}");
    assert!(sel.file.as_deref().unwrap().ends_with("/main.c"), "{sel:?}");
    assert_eq!(
        sel.line,
        Some(marker_line(MAIN_C, "MARK:app_write")),
        "{resolved:#?}"
    );
    assert_eq!(sel.binary, exe_path.to_str().unwrap());
    // The caller: return address adjusted back into the call's line.
    let main = find_fn(&resolved, "main");
    assert_eq!(
        main.line,
        Some(marker_line(MAIN_C, "MARK:call_app")),
        "{resolved:#?}"
    );
    assert!(
        sel.display().ends_with(&format!(
            "main.c:{}:app_write",
            marker_line(MAIN_C, "MARK:app_write")
        )),
        "{}",
        sel.display()
    );

    // The shared library's write.
    let lib = stack_with(&stacks, r#""lib\n""#);
    let resolved = sym.resolve_stack(&lib.frames);
    let sel = filter.select(&resolved).expect("selected frame");
    assert_eq!(sel.function.as_deref(), Some("foo_write"), "{resolved:#?}");
    assert!(
        sel.file.as_deref().unwrap().ends_with("/libfoo.c"),
        "{sel:?}"
    );
    assert_eq!(sel.line, Some(marker_line(LIB_C, "MARK:lib_write")));
    assert!(sel.binary.ends_with(&format!("lib{exe}foo.so")), "{sel:?}");
    let main = find_fn(&resolved, "main");
    assert_eq!(
        main.line,
        Some(marker_line(MAIN_C, "MARK:call_lib")),
        "{resolved:#?}"
    );

    // Cache hit returns identical results.
    assert_eq!(sym.resolve_stack(&lib.frames), resolved);
    assert_eq!(sym.is_loaded(exe_path.to_str().unwrap()), Some(true));
}

#[test]
fn pie_executable_and_shared_library() {
    check_debug_app(&[], "app_pie");
}

#[test]
fn non_pie_executable_and_shared_library() {
    check_debug_app(&["-no-pie"], "app_nopie");
}

#[test]
fn virtual_addresses_are_accepted_too() {
    // strace's libdw backend prints ELF virtual addresses instead of file
    // offsets; AddressKind::Auto tells them apart using symbol+offset.
    if !have_tools(&["gcc", "strace", "nm"]) {
        return;
    }
    let w = Work::new();
    let exe = build_app(&w, "app_va", &["-no-pie"], true);
    let stacks = w.strace(&exe, &[]);
    let app = stack_with(&stacks, r#""app\n""#);
    let raw = app
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("app_write"))
        .expect("app_write frame")
        .clone();
    let start = nm_address(&exe, "app_write").expect("nm app_write");
    let va = RawFrame {
        addr: start + raw.offset_in_symbol.unwrap(),
        ..raw.clone()
    };
    assert!(va.addr >= 0x400000 && va.addr != raw.addr);
    let want = marker_line(MAIN_C, "MARK:app_write");
    let mut sym = Symbolizer::new();
    for r in [&raw, &va] {
        let f = sym.resolve(r, false);
        assert_eq!(f.last().unwrap().function.as_deref(), Some("app_write"));
        assert_eq!(f.last().unwrap().line, Some(want), "{r:?} -> {f:?}");
    }
    // Explicit modes.
    let mut vsym = Symbolizer::with_options(SymbolizerOptions {
        address_kind: AddressKind::VirtualAddress,
        ..Default::default()
    });
    let f = vsym.resolve(
        &RawFrame {
            symbol: None,
            offset_in_symbol: None,
            ..va.clone()
        },
        false,
    );
    assert_eq!(f[0].line, Some(want));
    let mut osym = Symbolizer::with_options(SymbolizerOptions {
        address_kind: AddressKind::FileOffset,
        ..Default::default()
    });
    let f = osym.resolve(
        &RawFrame {
            symbol: None,
            offset_in_symbol: None,
            ..raw.clone()
        },
        false,
    );
    assert_eq!(f[0].line, Some(want));
}

#[test]
fn return_address_adjustment_is_a_parameter() {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    let exe = build_app(&w, "app_adj", &[], true);
    let stacks = w.strace(&exe, &[]);
    let app = stack_with(&stacks, r#""app\n""#);
    let raw = app
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("app_write"))
        .expect("app_write frame");
    let mut adjusted = Symbolizer::new();
    let mut unadjusted = Symbolizer::with_options(SymbolizerOptions {
        return_address_adjustment: 0,
        ..Default::default()
    });
    let want = marker_line(MAIN_C, "MARK:app_write");
    assert_eq!(adjusted.resolve(raw, false)[0].line, Some(want));
    // Treating it as innermost (no adjustment) lands after the call: at -O0
    // that is the closing brace of app_write.
    let closing = adjusted.resolve(raw, true);
    assert_eq!(closing[0].function.as_deref(), Some("app_write"));
    assert_eq!(closing[0].line, Some(want + 1), "{closing:?}");
    assert_eq!(unadjusted.resolve(raw, false)[0].line, Some(want + 1));
}

#[test]
fn inlined_function_yields_both_frames() {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    w.write("inl.c", INLINE_C);
    w.compile("gcc", &["-g", "-O2", "-o", "inl", "inl.c"]);
    let stacks = w.strace(&w.path("inl"), &[]);
    let st = stack_with(&stacks, r#""inl\n""#);
    let mut sym = Symbolizer::new();
    let resolved = sym.resolve_stack(&st.frames);

    let i = resolved
        .iter()
        .position(|f| f.function.as_deref() == Some("inl_write"))
        .unwrap_or_else(|| panic!("no inlined frame in {resolved:#?}"));
    let inl = &resolved[i];
    let caller = &resolved[i + 1];
    assert!(inl.file.as_deref().unwrap().ends_with("/inl.c"));
    assert_eq!(
        inl.line,
        Some(marker_line(INLINE_C, "MARK:inl_write")),
        "{resolved:#?}"
    );
    assert_eq!(caller.function.as_deref(), Some("outer"), "{resolved:#?}");
    assert_eq!(
        caller.line,
        Some(marker_line(INLINE_C, "MARK:outer_call")),
        "{resolved:#?}"
    );
    assert_eq!(inl.binary, caller.binary);

    // Both come from the same strace frame (the one strace calls `outer`).
    let raw = st
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("outer"))
        .expect("outer frame");
    let from_one = sym.resolve(raw, false);
    assert_eq!(from_one.len(), 2, "{from_one:#?}");
    assert_eq!(from_one[0].function.as_deref(), Some("inl_write"));
    assert_eq!(from_one[1].function.as_deref(), Some("outer"));

    // The filter picks the innermost application frame: the inlined one.
    let filter = FrameFilter::new(&[]).unwrap();
    assert_eq!(
        filter.select(&resolved).unwrap().function.as_deref(),
        Some("inl_write")
    );
    let main = find_fn(&resolved, "main");
    assert_eq!(main.line, Some(marker_line(INLINE_C, "MARK:main_call")));
}

#[test]
fn no_debug_info_yields_function_names_only() {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    let exe = build_app(&w, "app_nodbg", &[], false);
    let stacks = w.strace(&exe, &[]);
    let mut sym = Symbolizer::new();
    let filter = FrameFilter::new(&[]).unwrap();

    let app = stack_with(&stacks, r#""app\n""#);
    let resolved = sym.resolve_stack(&app.frames);
    let sel = filter.select(&resolved).unwrap();
    assert_eq!(sel.function.as_deref(), Some("app_write"), "{resolved:#?}");
    assert_eq!((sel.file.as_deref(), sel.line), (None, None));
    // The call site's offset keeps sites apart without a line table.
    assert!(sel.offset.is_some(), "{sel:?}");
    assert_eq!(
        sel.display(),
        format!("{}+{:#x}:app_write", exe.display(), sel.offset.unwrap())
    );

    // Without strace's symbol the ELF symbol table supplies the name.
    let raw = app
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("app_write"))
        .unwrap();
    let anon = RawFrame {
        symbol: None,
        offset_in_symbol: None,
        ..raw.clone()
    };
    let f = sym.resolve(&anon, false);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].function.as_deref(), Some("app_write"));
    assert_eq!(f[0].line, None);

    // A stripped shared library still has its dynamic symbol table.
    let lib = stack_with(&stacks, r#""lib\n""#);
    let raw = lib
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("foo_write"))
        .unwrap();
    if have_tools(&["strip"]) {
        let stripped = w.path("libstripped.so");
        std::fs::copy(&raw.binary, &stripped).unwrap();
        w.compile("strip", &[stripped.to_str().unwrap()]);
        let anon = RawFrame {
            binary: stripped.to_str().unwrap().to_string(),
            symbol: None,
            offset_in_symbol: None,
            ..raw.clone()
        };
        let f = sym.resolve(&anon, false);
        assert_eq!(f[0].function.as_deref(), Some("foo_write"), "{f:?}");
        assert_eq!(f[0].file, None);
    }
}

#[test]
fn missing_binary_keeps_strace_symbol() {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    let exe = build_app(&w, "app_gone", &[], true);
    let stacks = w.strace(&exe, &[]);
    let app = stack_with(&stacks, r#""app\n""#).clone();
    drop(w); // deletes the binaries
    assert!(!exe.exists());
    let mut sym = Symbolizer::new();
    let resolved = sym.resolve_stack(&app.frames);
    assert_eq!(resolved.len(), app.frames.len());
    let f = find_fn(&resolved, "app_write");
    assert_eq!((f.file.as_deref(), f.line), (None, None));
    assert_eq!(f.binary, exe.to_str().unwrap());
    // libc frames still resolve (at least by name) in the same stack.
    assert!(resolved[0].binary.contains("libc"), "{resolved:#?}");
    assert!(resolved[0].function.is_some());
    // And a directly constructed frame for a path that never existed.
    let raw = RawFrame {
        binary: "/definitely/not/here/libx.so".into(),
        symbol: Some("do_io".into()),
        offset_in_symbol: Some(0x14),
        addr: 0x1234,
    };
    let f = sym.resolve(&raw, true);
    assert_eq!(
        f,
        vec![Frame {
            function: Some("do_io".into()),
            offset: Some(0x1234),
            ..Frame::unknown("/definitely/not/here/libx.so")
        }]
    );
}

const CXX_SRC: &str = r#"#include <unistd.h>

namespace store {
struct Journal {
    __attribute__((noinline)) void append(int fd, const char *s, unsigned n)
    {
        ::write(fd, s, n); /* MARK:cxx_write */
    }
};
}

int main()
{
    store::Journal j;
    j.append(1, "cxx\n", 4);
    return 0;
}
"#;

#[test]
fn cxx_names_are_demangled() {
    if !have_tools(&["g++", "strace"]) {
        return;
    }
    for debug in [true, false] {
        let w = Work::new();
        w.write("j.cc", CXX_SRC);
        w.compile(
            "g++",
            &[if debug { "-g" } else { "-g0" }, "-O0", "-o", "j", "j.cc"],
        );
        let stacks = w.strace(&w.path("j"), &[]);
        let st = stack_with(&stacks, r#""cxx\n""#);
        let mut sym = Symbolizer::new();
        let resolved = sym.resolve_stack(&st.frames);
        let sel = FrameFilter::new(&[])
            .unwrap()
            .select(&resolved)
            .unwrap()
            .clone();
        let func = sel.function.clone().unwrap();
        assert!(
            func.starts_with("store::Journal::append"),
            "{func} / {resolved:#?}"
        );
        if debug {
            assert_eq!(sel.line, Some(marker_line(CXX_SRC, "MARK:cxx_write")));
        } else {
            assert_eq!(sel.line, None);
        }
    }
}

const STRIPPED_C: &str = r#"#include <unistd.h>

/* The only exported function: in a stripped binary, the nearest symbol below the
   static functions that follow it. */
__attribute__((noinline, used)) int exported_small(int x) { return x + 1; }

static __attribute__((noinline)) void hidden_write(int fd)
{
    write(fd, "hid\n", 4);
}

int main(void)
{
    hidden_write(1);
    return exported_small(0) - 1;
}
"#;

/// A stripped executable (only .dynsym, like Debian's /usr/bin/git): strace's unwinder
/// names code after the last exported function by that function (`error+0x761d` for git);
/// the symbolizer drops a name whose function is shorter than the offset, and the call
/// site's offset keeps sites apart.
#[test]
fn stripped_binaries_do_not_borrow_a_neighbours_name() {
    if !have_tools(&["gcc", "strace"]) {
        return;
    }
    let w = Work::new();
    w.write("s.c", STRIPPED_C);
    let exe = w.path("stripped");
    w.compile(
        "gcc",
        &[
            "-O0",
            "-g0",
            "-s",
            "-rdynamic",
            "-o",
            exe.to_str().unwrap(),
            w.path("s.c").to_str().unwrap(),
        ],
    );
    let stacks = w.strace(&exe, &[]);
    let st = stack_with(&stacks, r#""hid\n""#);
    let mut sym = Symbolizer::new();
    let resolved = sym.resolve_stack(&st.frames);
    let app: Vec<&Frame> = resolved
        .iter()
        .filter(|f| f.binary == exe.to_str().unwrap())
        .collect();
    assert!(!app.is_empty(), "{resolved:#?}");
    for f in &app {
        // hidden_write and main are not exported_small (main is exported by -rdynamic).
        assert_ne!(f.function.as_deref(), Some("exported_small"), "{f:?}");
        assert!(f.offset.is_some(), "{f:?}");
    }
}
