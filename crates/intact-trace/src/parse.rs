//! Parser for the raw output of `strace -f -k -y -q` (strace 6.x, x86_64).
//!
//! Each line is `PID  name(args) = ret`, an `<unfinished ...>` / `<... name resumed>`
//! pair when calls of several tasks interleave, a `+++ exited with N +++` /
//! `+++ killed by SIG +++` line, a `--- SIGNAL {...} ---` line, or a ` > frame` stack line
//! that belongs to the call completed just before it.

/// A decoded system-call argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    Int(i64),
    /// A quoted string; `truncated` when strace cut it at `-s` (printed `"..."...`).
    Str {
        bytes: Vec<u8>,
        truncated: bool,
    },
    /// A file descriptor with the path strace printed for it (`-y`), e.g. `3</tmp/a>`,
    /// `AT_FDCWD</tmp>` (fd = -100).
    Fd {
        fd: i64,
        path: Option<String>,
    },
    /// A symbolic constant, flag set or anything else printed bare (`O_RDWR|O_CREAT`, `NULL`).
    Sym(String),
    Struct(Vec<(Option<String>, Arg)>),
    Array(Vec<Arg>),
    /// `before => after` (values changed by the call, e.g. copy_file_range offsets).
    Changed(Box<Arg>, Box<Arg>),
}

impl Arg {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Arg::Int(v) => Some(*v),
            Arg::Fd { fd, .. } => Some(*fd),
            Arg::Sym(s) if s == "NULL" => Some(0),
            Arg::Sym(s) if s == "AT_FDCWD" => Some(-100),
            Arg::Changed(_, a) => a.as_int(),
            Arg::Array(v) if v.len() == 1 => v[0].as_int(),
            _ => None,
        }
    }
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Arg::Str { bytes, .. } => Some(bytes),
            _ => None,
        }
    }
    /// Flag names of a `A|B|C` set (or a single symbol); empty for numbers.
    pub fn flags(&self) -> Vec<&str> {
        match self {
            Arg::Sym(s) => s.split('|').map(str::trim).collect(),
            _ => Vec::new(),
        }
    }
    pub fn has_flag(&self, f: &str) -> bool {
        self.flags().contains(&f)
    }
    pub fn field(&self, name: &str) -> Option<&Arg> {
        match self {
            Arg::Struct(fields) => fields
                .iter()
                .find(|(n, _)| n.as_deref() == Some(name))
                .map(|(_, a)| a),
            Arg::Changed(b, _) => b.field(name),
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Arg::Sym(s) if s == "NULL")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ret {
    /// Success, with the path strace annotated on a returned fd (`= 3</tmp/a>`).
    Val(i64, Option<String>),
    /// Failure: `-1 ENOENT (...)`, or a restart code.
    Err(String),
    /// `= ?` (the call did not return: exit, execve in another thread, kill).
    Unknown,
}

impl Ret {
    pub fn ok(&self) -> Option<i64> {
        match self {
            Ret::Val(v, _) => Some(*v),
            _ => None,
        }
    }
}

/// One completed system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub tid: u32,
    pub name: String,
    pub args: Vec<Arg>,
    pub ret: Ret,
    /// Stack lines (` > bin(fn+0x1) [0x2]`), innermost first, unparsed.
    pub stack: Vec<String>,
    /// 1-based line in the raw trace where the call completed.
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Call(Call),
    Exited {
        tid: u32,
        code: i32,
        line: usize,
    },
    Killed {
        tid: u32,
        signal: String,
        line: usize,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("raw trace line {line}: {message}: {text:?}")]
    Line {
        line: usize,
        message: String,
        text: String,
    },
}

/// The parsed trace.
#[derive(Debug, Default)]
pub struct Trace {
    pub events: Vec<Event>,
    /// What the parse left besides the events (calls that never completed, whether the
    /// last line was whole).
    pub end: crate::TraceEnd,
}

/// Parses `name(args) = ret`.
pub fn parse_call(tid: u32, body: &str, line: usize) -> Result<Call, String> {
    let open = body
        .find('(')
        .ok_or("expected '(' after the system-call name")?;
    let name = body[..open].to_string();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("bad system-call name {name:?}"));
    }
    let mut p = P {
        s: body.as_bytes(),
        i: open + 1,
    };
    let mut args = Vec::new();
    p.ws();
    if p.peek() != Some(b')') {
        loop {
            args.push(p.value()?);
            p.ws();
            match p.next() {
                Some(b',') => {
                    p.ws();
                }
                Some(b')') => break,
                other => {
                    return Err(format!(
                        "expected ',' or ')' in arguments, found {:?}",
                        other.map(|b| b as char)
                    ))
                }
            }
        }
    } else {
        p.i += 1;
    }
    p.ws();
    if p.peek() != Some(b'=') {
        return Err("expected '= result' after the arguments".into());
    }
    p.i += 1;
    p.ws();
    let ret = parse_ret(&body[p.i..])?;
    Ok(Call {
        tid,
        name,
        args,
        ret,
        stack: Vec::new(),
        line,
    })
}

fn parse_ret(s: &str) -> Result<Ret, String> {
    let s = s.trim();
    if s.starts_with('?') {
        return Ok(Ret::Unknown);
    }
    let end = s.find([' ', '<']).unwrap_or(s.len());
    let num = &s[..end];
    let v = parse_int(num).ok_or_else(|| format!("bad result {num:?}"))?;
    let rest = &s[end..];
    if v < 0 {
        let errno = rest.trim().split(' ').next().unwrap_or("").to_string();
        return Ok(Ret::Err(errno));
    }
    if let Some(r) = rest.strip_prefix('<') {
        let mut p = P {
            s: r.as_bytes(),
            i: 0,
        };
        return Ok(Ret::Val(v, Some(p.angle_path())));
    }
    let rest = rest.trim();
    if rest.starts_with("ERESTART")
        || rest.starts_with('E') && rest.chars().nth(1).is_some_and(|c| c.is_ascii_uppercase())
    {
        return Ok(Ret::Err(rest.split(' ').next().unwrap_or("").to_string()));
    }
    Ok(Ret::Val(v, None))
}

fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()? as i64
    } else {
        s.parse::<u64>().ok()? as i64
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl P<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        // Never past the end: `rest` and slicing stay in bounds on cut-off lines.
        if c.is_some() {
            self.i += 1;
        }
        c
    }
    /// The unparsed rest of the line (empty at the end).
    fn rest(&self) -> &[u8] {
        self.s.get(self.i..).unwrap_or_default()
    }
    fn ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
        // `/* comment */`
        if self.rest().starts_with(b"/*") {
            if let Some(e) = find(self.rest(), b"*/") {
                self.i += e + 2;
                self.ws();
            }
        }
    }
    /// A path inside `<...>` (after the `<`), C-escaped; consumes the closing `>`.
    fn angle_path(&mut self) -> String {
        let mut out = Vec::new();
        while let Some(c) = self.next() {
            match c {
                b'>' => break,
                b'\\' => out.push(self.escape()),
                c => out.push(c),
            }
        }
        // strace marks unlinked files `<path>(deleted)`.
        if self.rest().starts_with(b"(deleted)") {
            self.i += "(deleted)".len();
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    fn escape(&mut self) -> u8 {
        match self.next() {
            Some(b'n') => b'\n',
            Some(b't') => b'\t',
            Some(b'r') => b'\r',
            Some(b'v') => 0x0b,
            Some(b'f') => 0x0c,
            Some(b'a') => 0x07,
            Some(b'b') => 0x08,
            Some(b'x') => {
                let mut v = 0u8;
                for _ in 0..2 {
                    match self.peek().and_then(|c| (c as char).to_digit(16)) {
                        Some(d) => {
                            v = v.wrapping_mul(16).wrapping_add(d as u8);
                            self.i += 1;
                        }
                        None => break,
                    }
                }
                v
            }
            Some(c @ b'0'..=b'7') => {
                let mut v = (c - b'0') as u32;
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            self.i += 1;
                        }
                        _ => break,
                    }
                }
                v as u8
            }
            Some(c) => c,
            None => b'\\',
        }
    }
    fn string(&mut self) -> Result<Arg, String> {
        self.i += 1; // opening quote
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err("unterminated string".into()),
                Some(b'"') => break,
                Some(b'\\') => {
                    let b = self.escape();
                    out.push(b)
                }
                Some(c) => out.push(c),
            }
        }
        let truncated = self.rest().starts_with(b"...");
        if truncated {
            self.i += 3;
        }
        Ok(Arg::Str {
            bytes: out,
            truncated,
        })
    }
    fn value(&mut self) -> Result<Arg, String> {
        self.ws();
        let v = match self.peek() {
            Some(b'"') => self.string()?,
            Some(b'{') => {
                self.i += 1;
                let mut fields = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b'}') {
                        self.i += 1;
                        break;
                    }
                    if self.rest().starts_with(b"...") {
                        self.i += 3;
                        continue;
                    }
                    // name=value or value
                    let save = self.i;
                    let mut name = None;
                    while let Some(c) = self.peek() {
                        if c.is_ascii_alphanumeric()
                            || c == b'_'
                            || c == b'.'
                            || c == b'['
                            || c == b']'
                        {
                            self.i += 1;
                        } else {
                            break;
                        }
                    }
                    if self.peek() == Some(b'=')
                        && self.i > save
                        && self.s.get(self.i + 1) != Some(&b'>')
                    {
                        name = Some(String::from_utf8_lossy(&self.s[save..self.i]).into_owned());
                        self.i += 1;
                    } else {
                        self.i = save;
                    }
                    let v = self.value()?;
                    fields.push((name, v));
                    self.ws();
                    match self.next() {
                        Some(b',') => {}
                        Some(b'}') => break,
                        other => {
                            return Err(format!(
                                "expected ',' or '}}' in a struct, found {:?}",
                                other.map(|b| b as char)
                            ))
                        }
                    }
                }
                Arg::Struct(fields)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        break;
                    }
                    if self.rest().starts_with(b"...") {
                        self.i += 3;
                        continue;
                    }
                    items.push(self.value()?);
                    self.ws();
                    match self.next() {
                        Some(b',') => {}
                        Some(b']') => break,
                        // bit sets like [SIGINT SIGTERM]
                        Some(b' ') => {}
                        other => {
                            return Err(format!(
                                "expected ',' or ']' in an array, found {:?}",
                                other.map(|b| b as char)
                            ))
                        }
                    }
                }
                Arg::Array(items)
            }
            Some(_) => self.bare()?,
            None => return Err("unexpected end of line in arguments".into()),
        };
        // `value => value`
        let save = self.i;
        self.ws();
        if self.rest().starts_with(b"=>") {
            self.i += 2;
            let after = self.value()?;
            return Ok(Arg::Changed(Box::new(v), Box::new(after)));
        }
        self.i = save;
        Ok(v)
    }
    /// Numbers, fds with paths, symbols and expressions, up to the next top-level `,`,
    /// `)`, `}` or `]`.
    fn bare(&mut self) -> Result<Arg, String> {
        let start = self.i;
        let mut depth = 0i32;
        while let Some(c) = self.peek() {
            match c {
                b'(' | b'{' | b'[' => depth += 1,
                b')' | b'}' | b']' if depth == 0 => break,
                b')' | b'}' | b']' => {
                    // The arm above took depth 0: only an opened bracket closes here.
                    assert!(depth > 0, "closing bracket at depth {depth}");
                    depth -= 1;
                }
                b',' if depth == 0 => break,
                b'"' => {
                    self.string()?;
                    continue;
                }
                b'<' if depth == 0 => {
                    let head = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                    self.i += 1;
                    let path = self.angle_path();
                    let fd = if head == "AT_FDCWD" {
                        Some(-100)
                    } else {
                        parse_int(&head)
                    };
                    return Ok(match fd {
                        Some(fd) => Arg::Fd {
                            fd,
                            path: Some(path),
                        },
                        None => Arg::Sym(head),
                    });
                }
                b' ' if depth == 0 && self.rest().starts_with(b" =>") => break,
                _ => {}
            }
            self.i += 1;
        }
        let text = String::from_utf8_lossy(&self.s[start..self.i])
            .trim()
            .to_string();
        Ok(match parse_int(&text) {
            Some(v) => Arg::Int(v),
            None => Arg::Sym(text),
        })
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_trace;

    #[test]
    fn write_with_escapes() {
        let c = parse_call(
            1,
            r#"write(3</tmp/st/d/a.txt>, "hello\n\0\1\377", 9) = 9"#,
            1,
        )
        .unwrap();
        assert_eq!(c.name, "write");
        assert_eq!(
            c.args[0],
            Arg::Fd {
                fd: 3,
                path: Some("/tmp/st/d/a.txt".into())
            }
        );
        assert_eq!(c.args[1].as_bytes().unwrap(), b"hello\n\0\x01\xff");
        assert_eq!(c.ret, Ret::Val(9, None));
        let c = parse_call(1, r#"write(3</tmp/d/b.txt>(deleted), "child", 5) = 5"#, 1).unwrap();
        assert_eq!(
            c.args[0],
            Arg::Fd {
                fd: 3,
                path: Some("/tmp/d/b.txt".into())
            }
        );
    }

    #[test]
    fn openat_and_errors() {
        let c = parse_call(1, r#"openat(AT_FDCWD</tmp/st>, "d/a.txt", O_RDWR|O_CREAT|O_TRUNC, 0644) = 3</tmp/st/d/a.txt>"#, 1).unwrap();
        assert_eq!(
            c.args[0],
            Arg::Fd {
                fd: -100,
                path: Some("/tmp/st".into())
            }
        );
        assert!(c.args[2].has_flag("O_CREAT"));
        assert_eq!(c.ret, Ret::Val(3, Some("/tmp/st/d/a.txt".into())));
        let c = parse_call(
            1,
            r#"openat(AT_FDCWD</x>, "nope", O_RDONLY) = -1 ENOENT (No such file or directory)"#,
            1,
        )
        .unwrap();
        assert_eq!(c.ret, Ret::Err("ENOENT".into()));
        let c = parse_call(1, r#"read(0x3, 0x7fff93361a88, 0x340)  = 0x340"#, 1).unwrap();
        assert_eq!(c.ret, Ret::Val(0x340, None));
        assert_eq!(c.args[0].as_int(), Some(3));
    }

    #[test]
    fn writev_clone3_cfr() {
        let c = parse_call(
            1,
            r#"writev(3</a>, [{iov_base="ab", iov_len=2}, {iov_base="cd", iov_len=2}], 2) = 4"#,
            1,
        )
        .unwrap();
        match &c.args[1] {
            Arg::Array(v) => {
                assert_eq!(v.len(), 2);
                assert_eq!(v[1].field("iov_base").unwrap().as_bytes().unwrap(), b"cd");
            }
            o => panic!("{o:?}"),
        }
        let c = parse_call(1, r#"clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD, child_tid=0x7f9729c88990, exit_signal=0, stack=0x7f9729488000, stack_size=0x7fff80, tls=0x7f9729c886c0} => {parent_tid=[1973]}, 88) = 1973"#, 1).unwrap();
        assert!(c.args[0].field("flags").unwrap().has_flag("CLONE_FILES"));
        assert_eq!(c.ret.ok(), Some(1973));
        let c = parse_call(
            1,
            r#"copy_file_range(3</a>, [0] => [5], 4</b>, NULL, 65536, 0) = 5"#,
            1,
        )
        .unwrap();
        assert_eq!(c.args[1].as_int(), Some(5));
        assert!(c.args[3].is_null());
        let c = parse_call(
            1,
            r#"execve("./t", ["./t"], 0x7fff1d7a0d28 /* 35 vars */) = 0"#,
            1,
        )
        .unwrap();
        assert_eq!(c.args.len(), 3);
    }

    #[test]
    fn interleaved_and_stacks() {
        let raw = b"1974  write(1</dev/null>, \"child\\n\", 6 <unfinished ...>\n1972  exit_group(0)                     = ?\n1974  <... write resumed>)              = 6\n > /lib/libc.so.6(__write+0x4f) [0xf838f]\n > /tmp/t(main+0x134) [0x13a4]\n1972  +++ exited with 0 +++\n1975  +++ killed by SIGKILL +++\n";
        let t = parse_trace(raw).unwrap();
        assert_eq!(t.events.len(), 4);
        match &t.events[1] {
            Event::Call(c) => {
                assert_eq!(c.name, "write");
                assert_eq!(c.args[1].as_bytes().unwrap(), b"child\n");
                assert_eq!(c.stack.len(), 2);
                assert_eq!(c.line, 3);
            }
            o => panic!("{o:?}"),
        }
        assert!(
            matches!(&t.events[3], Event::Killed { tid: 1975, signal, .. } if signal == "SIGKILL")
        );
        assert!(t.end.complete_last_line);
    }

    #[test]
    fn unfinished_at_end_is_reported() {
        let t = parse_trace(
            b"5  write(3</a>, \"x\", 1 <unfinished ...>\n5  +++ killed by SIGKILL +++\n",
        )
        .unwrap();
        assert_eq!(
            t.end.unfinished,
            vec![(5, "write(3</a>, \"x\", 1".to_string(), 1)]
        );
    }

    #[test]
    fn resumed_then_cut_off_again_is_unfinished() {
        // Seen when one thread execs while another is inside clone3.
        let raw = b"8218  clone3({flags=CLONE_VM, exit_signal=0, stack=0x7f, stack_size=0x7ff00} <unfinished ...>\n8217  execve(\"/bin/true\", [\"true\"], 0x7ffc /* 3 vars */ <unfinished ...>\n8218  <... clone3 resumed> <unfinished ...>) = ?\n8218  +++ exited with 0 +++\n8217  <... execve resumed>) = 0\n";
        let t = parse_trace(raw).expect("a cut-off resumed call parses");
        assert_eq!(
            t.end
                .unfinished
                .iter()
                .map(|u| (u.0, u.1.as_str()))
                .collect::<Vec<_>>(),
            vec![(8218, "clone3")]
        );
        assert!(t
            .events
            .iter()
            .any(|e| matches!(e, Event::Call(c) if c.name == "execve")));
    }

    #[test]
    fn exec_from_thread_changes_pid() {
        let raw = b"11  execve(\"/bin/sh\", [\"sh\"], 0x7ffc /* 3 vars */ <pid changed to 10 ...>\n10  +++ superseded by execve in pid 11 +++\n10  <... execve resumed>) = 0\n";
        let t = parse_trace(raw).unwrap();
        assert_eq!(t.events.len(), 1, "{:?}", t.events);
        match &t.events[0] {
            Event::Call(c) => assert_eq!(
                (c.tid, c.name.as_str(), c.ret.clone()),
                (10, "execve", Ret::Val(0, None))
            ),
            o => panic!("{o:?}"),
        }
        assert!(t.end.unfinished.is_empty());
    }

    #[test]
    fn truncated_string() {
        let c = parse_call(1, r#"write(3</a>, "abc"..., 100) = 100"#, 1).unwrap();
        assert_eq!(
            c.args[1],
            Arg::Str {
                bytes: b"abc".to_vec(),
                truncated: true
            }
        );
    }

    proptest::proptest! {
        // Any byte string, escaped the way strace escapes it, parses back to itself.
        #[test]
        fn escapes_roundtrip(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut s = String::from("write(3</a>, \"");
            for (i, &b) in bytes.iter().enumerate() {
                let next_is_digit = bytes.get(i + 1).is_some_and(|n| n.is_ascii_digit());
                match b {
                    b'\n' => s.push_str("\\n"),
                    b'"' => s.push_str("\\\""),
                    b'\\' => s.push_str("\\\\"),
                    0x20..=0x7e => s.push(b as char),
                    _ if next_is_digit => s.push_str(&format!("\\{:03o}", b)),
                    _ => s.push_str(&format!("\\{:o}", b)),
                }
            }
            s.push_str(&format!("\", {}) = {}", bytes.len(), bytes.len()));
            let c = parse_call(1, &s, 1).unwrap();
            proptest::prop_assert_eq!(c.args[1].as_bytes().unwrap(), &bytes[..]);
        }
    }
}

#[cfg(test)]
mod ioc_tests {
    #[test]
    fn an_unknown_ioctl_request_is_one_symbol() {
        let t = crate::parse_trace(b"100 ioctl(3</tmp>, _IOC(_IOC_NONE, 0xcc, 0x3, 0), 0) = 0\n")
            .unwrap();
        let super::Event::Call(call) = &t.events[0] else {
            panic!("{:?}", t.events)
        };
        assert_eq!(
            call.args[1].flags().join("|"),
            "_IOC(_IOC_NONE, 0xcc, 0x3, 0)",
            "{:?}",
            call.args
        );
    }
}
