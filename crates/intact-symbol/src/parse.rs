//! Parsing of the stack-frame lines printed by `strace -k`.

use serde::{Deserialize, Serialize};

/// One frame exactly as `strace -k` printed it.
///
/// `addr` is the bracketed number. With strace's libunwind backend (the one
/// Debian/Ubuntu ship) it is a *file offset* inside `binary`; with the libdw
/// backend it is an address in the ELF's own virtual address space.
/// [`crate::Symbolizer`] handles both (see [`crate::AddressKind`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RawFrame {
    /// Path of the mapped object (executable or shared library), as strace
    /// printed it. For strace's error lines (`unexpected_backtracing_error
    /// [0x..]`) this is the error text.
    pub binary: String,
    /// The symbol strace found (`func` in `bin(func+0x10)`), possibly mangled.
    pub symbol: Option<String>,
    /// The offset after the symbol (`0x10` in `bin(func+0x10)`).
    pub offset_in_symbol: Option<u64>,
    /// The bracketed number.
    pub addr: u64,
}

impl RawFrame {
    /// True for the placeholder frames strace prints when unwinding fails
    /// (`unexpected_backtracing_error`, `backtracing_error`, ...): they have
    /// no binary path.
    pub fn is_unwind_error(&self) -> bool {
        !self.binary.contains('/') && self.symbol.is_none()
    }
}

/// Parses one `strace -k` frame line.
///
/// Accepts the line with or without the leading `" > "` (and with trailing
/// newline). Recognised forms:
///
/// ```text
///  > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x10) [0xf8350]
///  > /usr/lib/libfoo.so(+0x1234) [0x1234]
///  > /usr/lib/libfoo.so() [0x1234]
///  > /tmp/app(ns::f(int)+0x1c) [0x1234]      (demangled names with parens)
///  > unexpected_backtracing_error [0x7f0011223344]
/// ```
///
/// Returns `None` for anything without a trailing `[0x...]` address (e.g.
/// the syscall lines themselves, or `> BUG IN ...`).
pub fn parse_strace_frame(line: &str) -> Option<RawFrame> {
    let mut s = line.trim();
    if let Some(rest) = s.strip_prefix('>') {
        s = rest.trim_start();
    }
    // Trailing " [0xADDR]".
    let s = s.strip_suffix(']')?;
    let lb = s.rfind('[')?;
    let addr = parse_hex(s[lb + 1..].trim())?;
    let head = s[..lb].trim_end();
    if head.is_empty() {
        return None;
    }

    let Some(inner_end) = head.strip_suffix(')') else {
        // "unexpected_backtracing_error [0x...]" and similar.
        return Some(RawFrame {
            binary: head.to_string(),
            symbol: None,
            offset_in_symbol: None,
            addr,
        });
    };
    // Find the '(' matching the final ')': symbol names may contain
    // balanced parentheses when strace demangles C++ names.
    let open = matching_open_paren(inner_end).or_else(|| inner_end.find('('))?;
    let binary = inner_end[..open].trim_end();
    if binary.is_empty() {
        return None;
    }
    let inner = &inner_end[open + 1..];
    let (symbol, offset_in_symbol) = split_symbol_offset(inner);
    Some(RawFrame {
        binary: binary.to_string(),
        symbol,
        offset_in_symbol,
        addr,
    })
}

/// `s` is the text after the opening paren, without the closing one.
/// Returns the byte index of the opening paren in the full head (i.e. the
/// paren that closes at the end of `s`), scanning right-to-left.
fn matching_open_paren(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_symbol_offset(inner: &str) -> (Option<String>, Option<u64>) {
    let inner = inner.trim();
    if inner.is_empty() {
        return (None, None);
    }
    if let Some(plus) = inner.rfind('+') {
        if let Some(off) = parse_hex(&inner[plus + 1..]) {
            let sym = inner[..plus].trim();
            if sym.is_empty() {
                // "(+0x1234)": offset relative to the module, not a symbol.
                return (None, None);
            }
            return (Some(sym.to_string()), Some(off));
        }
    }
    (Some(inner.to_string()), None)
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rf(binary: &str, symbol: Option<&str>, off: Option<u64>, addr: u64) -> RawFrame {
        RawFrame {
            binary: binary.into(),
            symbol: symbol.map(Into::into),
            offset_in_symbol: off,
            addr,
        }
    }

    #[test]
    fn symbol_and_offset() {
        assert_eq!(
            parse_strace_frame(" > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x10) [0xf8350]"),
            Some(rf(
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                Some("__write"),
                Some(0x10),
                0xf8350
            ))
        );
        assert_eq!(
            parse_strace_frame(" > /tmp/st/t(main+0x5b) [0x12cb]\n"),
            Some(rf("/tmp/st/t", Some("main"), Some(0x5b), 0x12cb))
        );
    }

    #[test]
    fn without_prefix() {
        assert_eq!(
            parse_strace_frame("/tmp/st/t(_start+0x21) [0x1151]"),
            Some(rf("/tmp/st/t", Some("_start"), Some(0x21), 0x1151))
        );
        assert_eq!(
            parse_strace_frame(">/tmp/st/t(_start+0x21) [0x1151]"),
            Some(rf("/tmp/st/t", Some("_start"), Some(0x21), 0x1151))
        );
    }

    #[test]
    fn no_symbol() {
        assert_eq!(
            parse_strace_frame(" > /usr/lib/libfoo.so(+0x1234) [0x1234]"),
            Some(rf("/usr/lib/libfoo.so", None, None, 0x1234))
        );
        assert_eq!(
            parse_strace_frame(" > /usr/lib/libfoo.so() [0x1234]"),
            Some(rf("/usr/lib/libfoo.so", None, None, 0x1234))
        );
    }

    #[test]
    fn symbol_without_offset() {
        assert_eq!(
            parse_strace_frame(" > /bin/x(foo) [0x10]"),
            Some(rf("/bin/x", Some("foo"), None, 0x10))
        );
    }

    #[test]
    fn error_line() {
        let f = parse_strace_frame(" > unexpected_backtracing_error [0x7f1234567890]").unwrap();
        assert_eq!(
            f,
            rf("unexpected_backtracing_error", None, None, 0x7f1234567890)
        );
        assert!(f.is_unwind_error());
        assert!(!parse_strace_frame(" > /a/b(+0x1) [0x1]")
            .unwrap()
            .is_unwind_error());
    }

    #[test]
    fn demangled_cpp_names_with_parens() {
        assert_eq!(
            parse_strace_frame(" > /tmp/app(ns::f(int, char const*)+0x1c) [0x11c4]"),
            Some(rf(
                "/tmp/app",
                Some("ns::f(int, char const*)"),
                Some(0x1c),
                0x11c4
            ))
        );
        assert_eq!(
            parse_strace_frame(" > /tmp/app(Foo::operator()()+0x8) [0x11c4]"),
            Some(rf("/tmp/app", Some("Foo::operator()()"), Some(0x8), 0x11c4))
        );
    }

    #[test]
    fn rejects_non_frames() {
        assert_eq!(parse_strace_frame("1234  write(1, \"hi\\n\", 3) = 3"), None);
        assert_eq!(parse_strace_frame(" > BUG IN print_call_cb"), None);
        assert_eq!(parse_strace_frame(" > backtracing_error"), None);
        assert_eq!(parse_strace_frame(""), None);
        assert_eq!(parse_strace_frame(" > /x(f+0x1) [zz]"), None);
        assert_eq!(parse_strace_frame(" > [0x12]"), None);
    }
}
