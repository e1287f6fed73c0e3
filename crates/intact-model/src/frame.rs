//! Resolved (symbolized) frames.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which language runtime a frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Machine code (C, C++, Rust, JNI...), resolved from ELF/DWARF.
    #[default]
    Native,
    /// A Python-level frame (produced by a Python tracer, not by this crate).
    Python,
    /// A Java-level frame (produced by a JVM agent, not by this crate).
    Java,
}

/// A symbolized frame. One strace frame can yield several of these when
/// functions were inlined (innermost first).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The object the code lives in (path as strace printed it).
    pub binary: String,
    /// Demangled function name.
    pub function: Option<String>,
    /// Source file (absolute when the DWARF has the compilation directory).
    pub file: Option<String>,
    /// 1-based source line; `None` when unknown (never 0).
    pub line: Option<u32>,
    pub lang: Lang,
    /// The call site's address in `binary` as strace printed it (a file
    /// offset), kept when there is no source line: it tells apart call sites
    /// in code without debug information (a stripped `/usr/bin/git`, or a
    /// library whose nearest exported symbol names the wrong function).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl Frame {
    /// A native frame with only the binary known.
    pub fn unknown(binary: impl Into<String>) -> Self {
        Frame {
            binary: binary.into(),
            function: None,
            file: None,
            line: None,
            lang: Lang::Native,
            offset: None,
        }
    }

    /// True when both file and line are known.
    pub fn has_location(&self) -> bool {
        self.file.is_some() && self.line.is_some()
    }

    /// Human-readable, single-line form:
    ///
    /// * `file:line:function` when all three are known,
    /// * `file:line` when the function is unknown,
    /// * `binary:function` when there is no line information,
    /// * `binary` (or `?` if even that is empty) otherwise;
    ///
    /// without a line, a known offset follows the binary: `binary+0x1f2a:function`.
    pub fn display(&self) -> String {
        if self.line.is_none() && !self.binary.is_empty() {
            if let Some(off) = self.offset {
                return match &self.function {
                    Some(func) => format!("{}+{off:#x}:{func}", self.binary),
                    None => format!("{}+{off:#x}", self.binary),
                };
            }
        }
        match (&self.file, self.line, &self.function) {
            (Some(file), Some(line), Some(func)) => format!("{file}:{line}:{func}"),
            (Some(file), Some(line), None) => format!("{file}:{line}"),
            (_, _, Some(func)) => {
                if self.binary.is_empty() {
                    func.clone()
                } else {
                    format!("{}:{func}", self.binary)
                }
            }
            (Some(file), None, None) => file.clone(),
            (None, _, None) => {
                if self.binary.is_empty() {
                    "?".to_string()
                } else {
                    self.binary.clone()
                }
            }
        }
    }
}

/// A source path without `.` components and with `name/..` pairs removed, as a reader
/// expects (`/w/work/../app.py` is `/w/app.py`). Lexical: a symlinked directory before a
/// `..` would change the answer, but compilers and interpreters write these paths from
/// the directories they were given, not resolved ones, so this is what was meant.
pub fn clean_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            // `/..` is `/`; a relative path keeps its leading `..`s.
            ".." if absolute => {}
            _ => parts.push(c),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn offsets_tell_call_sites_apart_without_lines() {
        let a = Frame {
            offset: Some(0x1f2a),
            ..fr("/usr/bin/git", None, None, None)
        };
        let b = Frame {
            offset: Some(0x2000),
            ..fr("/usr/bin/git", None, None, None)
        };
        assert_eq!(a.display(), "/usr/bin/git+0x1f2a");
        assert_ne!(a, b);
        assert_ne!(a.display(), b.display());
        let named = Frame {
            offset: Some(0x10),
            ..fr("/l.so", Some("f"), None, None)
        };
        assert_eq!(named.display(), "/l.so+0x10:f");
        // A source line wins over the offset.
        let lined = Frame {
            offset: Some(0x10),
            ..fr("/a", Some("f"), Some("/a.c"), Some(3))
        };
        assert_eq!(lined.display(), "/a.c:3:f");
        // Old bundles (no offset field) still load.
        let old: Frame = serde_json::from_str(
            r#"{"binary":"/a","function":null,"file":null,"line":null,"lang":"native"}"#,
        )
        .unwrap();
        assert_eq!(old.offset, None);
        assert!(!serde_json::to_string(&old).unwrap().contains("offset"));
    }

    #[test]
    fn clean_paths() {
        assert_eq!(clean_path("/w/work/../app.py"), "/w/app.py");
        assert_eq!(clean_path("/a/./b//c.c"), "/a/b/c.c");
        assert_eq!(clean_path("/../x"), "/x");
        assert_eq!(clean_path("../x/../../y"), "../../y");
        assert_eq!(clean_path("a/.."), ".");
        assert_eq!(clean_path("src/kv.c"), "src/kv.c");
    }

    #[test]
    fn display_forms() {
        assert_eq!(
            fr("/bin/a", Some("main"), Some("/src/a.c"), Some(12)).display(),
            "/src/a.c:12:main"
        );
        assert_eq!(
            fr("/bin/a", None, Some("/src/a.c"), Some(12)).display(),
            "/src/a.c:12"
        );
        assert_eq!(
            fr("/bin/a", Some("main"), None, None).display(),
            "/bin/a:main"
        );
        assert_eq!(
            fr("/bin/a", Some("main"), Some("/src/a.c"), None).display(),
            "/bin/a:main"
        );
        assert_eq!(fr("", Some("main"), None, None).display(), "main");
        assert_eq!(fr("/bin/a", None, None, None).display(), "/bin/a");
        assert_eq!(fr("", None, None, None).display(), "?");
        assert_eq!(
            fr("/bin/a", None, Some("/src/a.c"), None).display(),
            "/src/a.c"
        );
        assert_eq!(
            format!("{}", fr("/bin/a", Some("f"), None, None)),
            "/bin/a:f"
        );
    }

    #[test]
    fn serde_lang_lowercase() {
        let f = Frame {
            lang: Lang::Python,
            ..fr("b", Some("f"), Some("x.py"), Some(3))
        };
        let j = serde_json::to_string(&f).unwrap();
        assert!(j.contains("\"lang\":\"python\""), "{j}");
        let back: Frame = serde_json::from_str(&j).unwrap();
        assert_eq!(back, f);
        assert_eq!(serde_json::to_string(&Lang::Java).unwrap(), "\"java\"");
        assert_eq!(serde_json::to_string(&Lang::Native).unwrap(), "\"native\"");
    }
}
