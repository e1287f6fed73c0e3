//! Choosing "the application's frame" out of a resolved stack.

use regex::{Regex, RegexSet};

use intact_model::frame::Frame;

const N_DEFAULT: usize = 15;

/// Default skip patterns; see [`FrameFilter`] for the string they are
/// matched against (`<binary>|<function>|<file>`).
static DEFAULT_PATTERNS: [&str; N_DEFAULT] = [
    // 0: the C library and friends (glibc, incl. old libc-2.31.so names).
    r"(?:^|/)(?:libc|libpthread|libdl|librt)(?:-[0-9.]+)?\.so(?:\.[0-9.]+)?\|",
    // 1: the dynamic loader / musl's libc (ld-linux-x86-64.so.2, ld-musl-x86_64.so.1).
    r"(?:^|/)(?:ld-linux|ld-musl|libc\.musl)[^/|]*\|",
    // 2: the vDSO.
    r"^(?:\[vdso[^|]*|[^|]*linux-(?:vdso|gate)\.so[^/|]*)\|",
    // 3: C++ / unwinder runtimes.
    r"(?:^|/)(?:libstdc\+\+|libgcc_s|libc\+\+|libc\+\+abi|libunwind)\.so[^/|]*\|",
    // 4: intact's own LD_PRELOAD shim.
    r"(?:^|/)libintact_preload[^/|]*\.so[^/|]*\|",
    // 5: CPython's own native frames (interpreter executable or libpython),
    //    recognised by having no file or a C source/header file, so that
    //    Python-level frames attributed to the interpreter binary survive.
    r"(?:^|/)(?:python[0-9.]*[a-z]*|libpython[0-9.]*[a-z]*\.so[^/|]*)\|[^|]*\|(?:[^|]*\.[ch])?$",
    // 6: JVM native libraries (JNI entry points `Java_*` are exempt).
    r"(?:^|/)lib(?:jvm|java|nio|net|zip|jli|jimage|verify|management)\.so\|",
    // 7: the Python standard library (site-/dist-packages are exempt).
    r"\|[^|]*/lib/python[0-9]\.[0-9]+/[^|]*$",
    // 8: frozen importlib frames.
    r"\|<frozen [^|]*>$",
    // 9: code inlined from system headers (fortify wrappers, libstdc++ templates).
    r"\|/usr/include/[^|]*$",
    // 10: Rust standard library sources.
    r"\|/rustc/[0-9a-f]+/library/[^|]*$",
    // 11: Rust standard library functions (also without debug info).
    r"^[^|]*\|<?(?:&(?:mut )?)?(?:std|core|alloc)::",
    // 12: glibc-internal symbols in a statically linked binary.
    r"^[^|]*\|(?:__libc_start_main|__libc_start_call_main|_start|__GI_[^|]*|__libc_[^|]*)\|",
    // 13: C++ standard library functions without debug info (e.g. in a static binary).
    r"^[^|]*\|(?:std::|__gnu_cxx::|__cxxabiv1::)",
    // 14: Java frames of the JDK (from the shim's JV markers: binary `java`, function
    //     `package.Class.method`).
    r"^java\|(?:java|javax|jdk|sun|com\.sun)\.",
];

/// Exemptions for the default patterns (same index): a frame matching the
/// skip pattern is kept when it also matches its exemption. (The `regex`
/// crate has no look-around, hence the pairs.)
static DEFAULT_UNLESS: [Option<&str>; N_DEFAULT] = [
    None,
    None,
    None,
    None,
    None,
    None,
    // JNI entry points such as Java_sun_nio_ch_FileDispatcherImpl_force0.
    Some(r"^[^|]*\|Java_[^|]*\|"),
    // Third-party packages installed under lib/python3.NN/.
    Some(r"\|[^|]*/lib/python[0-9]\.[0-9]+/(?:site|dist)-packages/[^|]*$"),
    None,
    None,
    None,
    None,
    None,
    None,
    None,
];

/// Chooses the application's frame: the first (innermost) frame not
/// matching any skip pattern.
///
/// Each pattern (a [`regex`] pattern, unanchored) is matched against the
/// string `"<binary>|<function>|<file>"` built from the frame, with an empty
/// field for a missing function or file. For example
/// `/usr/lib/x86_64-linux-gnu/libc.so.6|__GI___libc_write|` or
/// `/tmp/app|main|/src/app.c`. So a pattern can target
///
/// * a library path: `(?:^|/)libfoo\.so[^|]*\|` (anchor on the first `|`),
/// * a function: `^[^|]*\|my_wrapper_fn\|`,
/// * a source file: `\|/src/vendor/[^|]*$`.
///
/// The defaults ([`FrameFilter::default_patterns`]) skip the C library and
/// dynamic loader, the C++ runtime, intact's preload shim, CPython's native
/// frames and standard library, the JVM's native libraries (except JNI
/// `Java_*` entry points), code inlined from `/usr/include`, and Rust's
/// standard library.
///
/// If every frame is skipped, [`FrameFilter::select`] returns the innermost
/// frame with a file and line, else the first frame.
#[derive(Clone, Debug)]
pub struct FrameFilter {
    skip: RegexSet,
    /// `unless[i]` exempts frames from `skip[i]`.
    unless: Vec<Option<Regex>>,
    /// Frames matching any of these are never skipped (to study a library as
    /// the application: `/dbm/`, `libsqlite3`).
    keep: Option<RegexSet>,
}

impl Default for FrameFilter {
    fn default() -> Self {
        Self::new(&[]).expect("default frame filter patterns are valid")
    }
}

impl FrameFilter {
    /// The default patterns plus `extra_skip` (which have no exemptions).
    pub fn new(extra_skip: &[String]) -> Result<Self, regex::Error> {
        let mut patterns: Vec<(String, Option<String>)> = DEFAULT_PATTERNS
            .iter()
            .zip(DEFAULT_UNLESS.iter())
            .map(|(p, u)| (p.to_string(), u.map(str::to_string)))
            .collect();
        patterns.extend(extra_skip.iter().map(|p| (p.clone(), None)));
        Self::from_rules(&patterns)
    }

    /// Only the given skip patterns (no defaults, no exemptions).
    pub fn with_patterns_only(skip: &[String]) -> Result<Self, regex::Error> {
        let rules: Vec<(String, Option<String>)> = skip.iter().map(|p| (p.clone(), None)).collect();
        Self::from_rules(&rules)
    }

    /// Fully custom rules: `(skip pattern, optional exemption pattern)`.
    pub fn from_rules(rules: &[(String, Option<String>)]) -> Result<Self, regex::Error> {
        let skip = RegexSet::new(rules.iter().map(|(p, _)| p.as_str()))?;
        let unless = rules
            .iter()
            .map(|(_, u)| u.as_deref().map(Regex::new).transpose())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FrameFilter {
            skip,
            unless,
            keep: None,
        })
    }

    /// Adds patterns whose frames are never skipped, whatever the skip rules
    /// say (matched against the same key as the skip patterns).
    pub fn with_keep(mut self, keep: &[String]) -> Result<Self, regex::Error> {
        self.keep = if keep.is_empty() {
            None
        } else {
            Some(RegexSet::new(keep)?)
        };
        Ok(self)
    }

    /// The built-in skip patterns.
    pub fn default_patterns() -> &'static [&'static str] {
        &DEFAULT_PATTERNS
    }

    /// The exemption for each built-in pattern (same length and order as
    /// [`FrameFilter::default_patterns`]).
    pub fn default_exemptions() -> &'static [Option<&'static str>] {
        &DEFAULT_UNLESS
    }

    /// The string patterns are matched against: `"<binary>|<function>|<file>"`.
    pub fn match_key(frame: &Frame) -> String {
        format!(
            "{}|{}|{}",
            frame.binary,
            frame.function.as_deref().unwrap_or(""),
            frame.file.as_deref().unwrap_or("")
        )
    }

    /// Whether the frame is library/runtime code to be skipped.
    pub fn is_skipped(&self, frame: &Frame) -> bool {
        let key = Self::match_key(frame);
        if self.keep.as_ref().is_some_and(|k| k.is_match(&key)) {
            return false;
        }
        self.skip
            .matches(&key)
            .iter()
            .any(|i| match &self.unless[i] {
                Some(exempt) => !exempt.is_match(&key),
                None => true,
            })
    }

    /// Index of the selected frame; see [`FrameFilter::select`].
    pub fn select_index(&self, stack: &[Frame]) -> Option<usize> {
        if stack.is_empty() {
            return None;
        }
        stack
            .iter()
            .position(|f| !self.is_skipped(f))
            .or_else(|| stack.iter().position(Frame::has_location))
            .or(Some(0))
    }

    /// The first (innermost) frame not matching any skip pattern; if all are
    /// skipped, the innermost frame with file and line, else the first frame.
    /// `None` only for an empty stack.
    pub fn select<'a>(&self, stack: &'a [Frame]) -> Option<&'a Frame> {
        self.select_index(stack).map(|i| &stack[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use intact_model::frame::Lang;

    fn fr(binary: &str, function: Option<&str>, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            binary: binary.into(),
            function: function.map(Into::into),
            file: file.map(Into::into),
            line,
            lang: Lang::Native,
            offset: None,
        }
    }

    #[test]
    fn jdk_java_frames_are_skipped_and_the_application_s_kept() {
        let java = |function: &str, file: &str, line: u32| Frame {
            lang: Lang::Java,
            ..fr("java", Some(function), Some(file), Some(line))
        };
        let stack = [
            java(
                "java.io.FileDescriptor.sync",
                "java/io/FileDescriptor.java",
                0,
            ),
            java(
                "sun.nio.fs.UnixCopyFile.move",
                "sun/nio/fs/UnixCopyFile.java",
                408,
            ),
            java(
                "jdk.internal.misc.Unsafe.x",
                "jdk/internal/misc/Unsafe.java",
                1,
            ),
            java("com.example.Store.save", "com/example/Store.java", 9),
            java("Main.main", "Main.java", 14),
        ];
        let plain = FrameFilter::new(&[]).unwrap();
        assert_eq!(plain.select(&stack), Some(&stack[3]));
        // A user's --frame-skip works on Java frames too.
        let skip_store = FrameFilter::new(&[r"\|com\.example\.Store\.".into()]).unwrap();
        assert_eq!(skip_store.select(&stack), Some(&stack[4]));
    }

    #[test]
    fn keep_patterns_override_every_skip_rule() {
        let stdlib = Frame {
            lang: Lang::Python,
            ..fr(
                "python",
                Some("_commit"),
                Some("/usr/lib/python3.11/dbm/dumb.py"),
                Some(90),
            )
        };
        let app = Frame {
            lang: Lang::Python,
            ..fr("python", Some("main"), Some("/w/app.py"), Some(3))
        };
        let plain = FrameFilter::new(&[]).unwrap();
        assert!(plain.is_skipped(&stdlib));
        assert_eq!(plain.select(&[stdlib.clone(), app.clone()]), Some(&app));
        let keep = FrameFilter::new(&["dumb".into()])
            .unwrap()
            .with_keep(&[r"/dbm/[^|]*\.py$".into()])
            .unwrap();
        // Kept although both a default rule and an extra skip pattern match.
        assert!(!keep.is_skipped(&stdlib));
        assert_eq!(keep.select(&[stdlib.clone(), app.clone()]), Some(&stdlib));
        assert!(FrameFilter::new(&[])
            .unwrap()
            .with_keep(&["(".into()])
            .is_err());
    }

    fn skipped(f: &Frame) -> bool {
        FrameFilter::default().is_skipped(f)
    }

    #[test]
    fn defaults_compile() {
        let f = FrameFilter::new(&[]).unwrap();
        assert_eq!(f.unless.len(), FrameFilter::default_patterns().len());
        assert_eq!(
            FrameFilter::default_exemptions().len(),
            FrameFilter::default_patterns().len()
        );
    }

    #[test]
    fn skips_system_libraries() {
        for b in [
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/lib/x86_64-linux-gnu/libc-2.31.so",
            "/lib/x86_64-linux-gnu/libpthread.so.0",
            "/lib64/ld-linux-x86-64.so.2",
            "/lib/ld-musl-x86_64.so.1",
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30",
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/opt/intact/lib/libintact_preload.so",
            "/opt/intact/lib/libintact_preload-x86_64.so",
            "/usr/lib/jvm/java-17/lib/server/libjvm.so",
            "/usr/lib/jvm/java-17/lib/libnio.so",
            "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
            "/usr/bin/python3.11",
            "/usr/bin/python3",
            "libc.so.6",
        ] {
            assert!(
                skipped(&fr(b, Some("f"), None, None)),
                "{b} should be skipped"
            );
        }
        for b in [
            "/usr/lib/x86_64-linux-gnu/libcurl.so.4",
            "/usr/lib/libcrypto.so.3",
            "/home/u/app",
            "/home/u/python_tool",
            "/home/u/libjava_helper.so",
            "/usr/lib/libsqlite3.so.0",
        ] {
            assert!(
                !skipped(&fr(b, Some("f"), None, None)),
                "{b} should be kept"
            );
        }
    }

    #[test]
    fn jni_entry_points_are_kept() {
        let f = fr(
            "/usr/lib/jvm/java-17/lib/libnio.so",
            Some("Java_sun_nio_ch_FileDispatcherImpl_force0"),
            None,
            None,
        );
        assert!(!skipped(&f));
        // ... unless the user asks for it explicitly.
        let filt = FrameFilter::new(&[r"\|Java_sun_nio_".to_string()]).unwrap();
        assert!(filt.is_skipped(&f));
    }

    #[test]
    fn python_frames() {
        let py = |file: &str| Frame {
            lang: Lang::Python,
            ..fr("python", Some("f"), Some(file), Some(1))
        };
        assert!(skipped(&py("/usr/lib/python3.11/shutil.py")));
        assert!(skipped(&py("/opt/venv/lib/python3.12/tempfile.py")));
        assert!(!skipped(&py(
            "/usr/lib/python3.11/site-packages/foo/bar.py"
        )));
        assert!(!skipped(&py("/opt/venv/lib/python3.12/dist-packages/x.py")));
        assert!(!skipped(&py("/home/u/app.py")));
        assert!(skipped(&py("<frozen importlib._bootstrap>")));
        // Interpreter C frames vs Python frames on the interpreter binary.
        assert!(skipped(&fr(
            "/usr/bin/python3.11",
            Some("_io_FileIO_write"),
            Some("../Modules/_io/fileio.c"),
            Some(3)
        )));
        assert!(!skipped(&fr(
            "/usr/bin/python3.11",
            Some("save"),
            Some("/home/u/app.py"),
            Some(3)
        )));
    }

    #[test]
    fn rust_and_cxx_std() {
        assert!(skipped(&fr(
            "/app",
            Some("std::fs::File::sync_all"),
            None,
            None
        )));
        assert!(skipped(&fr(
            "/app",
            Some("<std::fs::File as std::io::Write>::write"),
            None,
            None
        )));
        assert!(skipped(&fr(
            "/app",
            Some("<&std::fs::File as std::io::Write>::write"),
            None,
            None
        )));
        assert!(!skipped(&fr(
            "/app",
            Some("<app::Db as std::io::Write>::write"),
            None,
            None
        )));
        assert!(!skipped(&fr(
            "/app",
            Some("app::save"),
            Some("/src/main.rs"),
            Some(1)
        )));
        assert!(skipped(&fr(
            "/app",
            Some("write"),
            Some("/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/fs.rs"),
            Some(1)
        )));
        assert!(skipped(&fr(
            "/app",
            Some("read"),
            Some("/usr/include/x86_64-linux-gnu/bits/unistd.h"),
            Some(1)
        )));
        assert!(skipped(&fr(
            "/app",
            Some("std::basic_ostream<char>::write"),
            None,
            None
        )));
    }

    #[test]
    fn select_app_frame() {
        let stack = vec![
            fr(
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                Some("__write"),
                None,
                None,
            ),
            fr(
                "/opt/lib/libintact_preload.so",
                Some("write"),
                Some("/src/preload.c"),
                Some(10),
            ),
            fr("/tmp/app", Some("save"), Some("/src/app.c"), Some(42)),
            fr("/tmp/app", Some("main"), Some("/src/app.c"), Some(50)),
            fr(
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                Some("__libc_start_main"),
                None,
                None,
            ),
        ];
        let f = FrameFilter::default();
        assert_eq!(f.select(&stack).unwrap().function.as_deref(), Some("save"));
        assert_eq!(f.select_index(&stack), Some(2));
        // Extra patterns.
        let f = FrameFilter::new(&[r"^[^|]*\|save\|".into()]).unwrap();
        assert_eq!(f.select(&stack).unwrap().function.as_deref(), Some("main"));
        let f = FrameFilter::new(&[r"\|/src/app\.c$".into()]).unwrap();
        // All skipped -> innermost with file:line (the preload frame).
        assert_eq!(f.select(&stack).unwrap().function.as_deref(), Some("write"));
    }

    #[test]
    fn select_fallbacks() {
        let f = FrameFilter::default();
        assert_eq!(f.select(&[]), None);
        let libc_only = vec![
            fr("/usr/lib/libc.so.6", Some("__write"), None, None),
            fr("/usr/lib/libc.so.6", Some("__libc_start_main"), None, None),
        ];
        assert_eq!(
            f.select(&libc_only).unwrap().function.as_deref(),
            Some("__write")
        );
    }

    #[test]
    fn invalid_extra_pattern_is_an_error() {
        assert!(FrameFilter::new(&["(".to_string()]).is_err());
        assert!(FrameFilter::from_rules(&[("a".into(), Some("(".into()))]).is_err());
    }

    #[test]
    fn patterns_only() {
        let f = FrameFilter::with_patterns_only(&[r"(?:^|/)libc\.so".into()]).unwrap();
        assert!(f.is_skipped(&fr("/lib/libc.so.6", None, None, None)));
        assert!(!f.is_skipped(&fr("/lib/libstdc++.so.6", None, None, None)));
    }
}
