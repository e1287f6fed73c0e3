//! Markers: messages the LD_PRELOAD shim (shim/intact_preload.c) sends to the tracer as
//! `write(-1, "INTACT1 ...", n)` calls, which fail with EBADF but appear in the trace in
//! line with the task's real calls. See shim/README.md for the protocol.

pub const MAGIC: &[u8] = b"INTACT1 ";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    /// The task's Python stack (innermost first) for the calls that follow it;
    /// empty when the task runs no Python code.
    Python(Vec<SourceFrame>),
    /// The task's Java stack (innermost first, from JVMTI) for the calls that follow it;
    /// sent only before calls the JDK's JNI libraries make.
    Java(Vec<SourceFrame>),
    /// Current bytes of a shared writable file mapping at virtual address `addr`.
    MapWrite { addr: u64, data: Vec<u8> },
    /// The bytes the next copy_file_range/sendfile of this task copies (None: too large).
    Copy(Option<Vec<u8>>),
    /// The process asks for intactfs stream `id` (SETSTREAM, whose argument strace cannot
    /// decode), with its flags (bit 0: IGNORE_FSYNC).
    Stream { id: u64, flags: u32 },
}

/// A source-level frame of an interpreted or managed language (`file:line:function`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFrame {
    pub file: String,
    pub line: u32,
    pub function: String,
}

/// Decodes a marker buffer; `None` if `buf` is not a marker at all.
pub fn decode(buf: &[u8]) -> Option<Result<Marker, String>> {
    let rest = buf.strip_prefix(MAGIC)?;
    let nl = match rest.iter().position(|&b| b == b'\n') {
        Some(n) => n,
        None => return Some(Err("marker without a header line".into())),
    };
    let header = String::from_utf8_lossy(&rest[..nl]).into_owned();
    let body = &rest[nl + 1..];
    let mut parts = header.split(' ');
    let kind = parts.next().unwrap_or("");
    Some(match kind {
        "PY" => frames(&header, parts.next(), body).map(Marker::Python),
        "JV" => frames(&header, parts.next(), body).map(Marker::Java),
        "MW" => {
            let addr = parts.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let len: Option<usize> = parts.next().and_then(|l| l.parse().ok());
            match (addr, len) {
                (Some(addr), Some(len)) if len == body.len() => Ok(Marker::MapWrite {
                    addr,
                    data: body.to_vec(),
                }),
                (Some(_), Some(len)) => Err(format!(
                    "MW marker announced {len} bytes, carried {} (raise --max-write?)",
                    body.len()
                )),
                _ => Err(format!("bad MW marker header {header:?}")),
            }
        }
        "CP" => match parts.next() {
            Some("-1") => Ok(Marker::Copy(None)),
            Some(l) => match l.parse::<usize>() {
                Ok(len) if len == body.len() => Ok(Marker::Copy(Some(body.to_vec()))),
                Ok(len) => Err(format!(
                    "CP marker announced {len} bytes, carried {}",
                    body.len()
                )),
                Err(_) => Err(format!("bad CP marker header {header:?}")),
            },
            None => Err(format!("bad CP marker header {header:?}")),
        },
        "ST" => {
            let id = parts.next().and_then(|a| u64::from_str_radix(a, 16).ok());
            let flags = parts.next().and_then(|a| u32::from_str_radix(a, 16).ok());
            match (id, flags) {
                (Some(id), Some(flags)) => Ok(Marker::Stream { id, flags }),
                _ => Err(format!("bad ST marker header {header:?}")),
            }
        }
        other => Err(format!("unknown marker kind {other:?}")),
    })
}

/// The `n` frames (`file:line:function` lines; the file may itself contain ':') of a PY
/// or JV marker.
fn frames(header: &str, n: Option<&str>, body: &[u8]) -> Result<Vec<SourceFrame>, String> {
    let Some(n) = n.and_then(|n| n.parse::<usize>().ok()) else {
        return Err(format!("bad marker header {header:?}"));
    };
    let text = String::from_utf8_lossy(body);
    let mut frames = Vec::with_capacity(n.min(64));
    for l in text.lines().take(n) {
        let mut it = l.rsplitn(3, ':');
        let (func, line, file) = (it.next(), it.next(), it.next());
        match (file, line.and_then(|l| l.parse().ok()), func) {
            (Some(file), Some(line), Some(func)) => frames.push(SourceFrame {
                file: file.into(),
                line,
                function: func.into(),
            }),
            _ => return Err(format!("bad frame {l:?} in marker {header:?}")),
        }
    }
    if frames.len() != n {
        return Err(format!(
            "marker {header:?} announced {n} frames, carried {}",
            frames.len()
        ));
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn decodes() {
        assert_eq!(decode(b"hello"), None);
        let m = decode(b"INTACT1 PY 2\n/a/b.py:12:f\nC:/x.py:3:<module>\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            m,
            Marker::Python(vec![
                SourceFrame {
                    file: "/a/b.py".into(),
                    line: 12,
                    function: "f".into()
                },
                SourceFrame {
                    file: "C:/x.py".into(),
                    line: 3,
                    function: "<module>".into()
                }
            ])
        );
        assert_eq!(
            decode(b"INTACT1 PY 0\n").unwrap().unwrap(),
            Marker::Python(vec![])
        );
        assert_eq!(
            decode(b"INTACT1 MW 7f00 3\nabc").unwrap().unwrap(),
            Marker::MapWrite {
                addr: 0x7f00,
                data: b"abc".to_vec()
            }
        );
        assert!(decode(b"INTACT1 MW 7f00 4\nabc").unwrap().is_err());
        assert_eq!(
            decode(b"INTACT1 CP -1\n").unwrap().unwrap(),
            Marker::Copy(None)
        );
        assert_eq!(
            decode(b"INTACT1 CP 2\nhi").unwrap().unwrap(),
            Marker::Copy(Some(b"hi".to_vec()))
        );
        assert_eq!(
            decode(b"INTACT1 ST 9e3779b97f4a7c15 1\n").unwrap().unwrap(),
            Marker::Stream {
                id: 0x9e37_79b9_7f4a_7c15,
                flags: 1
            }
        );
        assert!(decode(b"INTACT1 ST zz 1\n").unwrap().is_err());
    }

    #[test]
    fn decodes_java_frames() {
        let m = decode(b"INTACT1 JV 2\njava/io/FileDescriptor.java:0:java.io.FileDescriptor.sync\nMain.java:9:Main.save\n")
            .unwrap()
            .unwrap();
        let Marker::Java(frames) = m else {
            panic!("a JV marker is Java: {m:?}")
        };
        assert_eq!(frames[1].file, "Main.java");
        assert_eq!(frames[1].line, 9);
        assert_eq!(frames[1].function, "Main.save");
        assert!(decode(b"INTACT1 JV 2\nMain.java:9:Main.save\n")
            .unwrap()
            .is_err());
        assert!(decode(b"INTACT1 JV x\n").unwrap().is_err());
    }
}
