//! Operations as people read them: one-line descriptions, byte previews, and the source
//! location a frame filter picks (for `intact ops` and the report).

use crate::Error;
use intact_bundle::Bundle;
use intact_model::{Data, LogicalOp, Op};
// Re-exported: callers pass the filter this module builds.
pub use intact_symbol::FrameFilter;

/// A short printable view of some bytes.
pub fn preview(bytes: &[u8], max: usize) -> String {
    let mut s = String::from("\"");
    for &b in bytes.iter().take(max) {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    if bytes.len() > max {
        s.push_str(&format!("…({} bytes)", bytes.len()));
    }
    s
}

fn data_view(d: &Data, blob: &[u8]) -> String {
    match d {
        Data::Zeros { zeros } => format!("<{zeros} zero bytes>"),
        _ => match d.bytes(blob) {
            Ok(b) => preview(&b, 24),
            Err(e) => format!("<{e}>"),
        },
    }
}

/// One line describing an operation, without its location.
pub fn describe(op: &Op, blob: &[u8]) -> String {
    let path = op.path.clone().unwrap_or_default();
    match &op.op {
        LogicalOp::Overwrite {
            inode,
            offset,
            count,
            data,
        } => {
            format!(
                "overwrite {path} [{offset}, {}) {count} bytes {} (inode {inode})",
                offset + count,
                data_view(data, blob)
            )
        }
        LogicalOp::Append {
            inode,
            old_size,
            new_size,
            data,
        } => {
            format!(
                "append    {path} size {old_size} -> {new_size} {} (inode {inode})",
                data_view(data, blob)
            )
        }
        LogicalOp::Truncate {
            inode,
            old_size,
            new_size,
        } => format!("truncate  {path} size {old_size} -> {new_size} (inode {inode})"),
        LogicalOp::Link {
            inode,
            link_count,
            created,
            ..
        } => {
            if *created {
                format!("link      {path} (creates inode {inode})")
            } else {
                format!(
                    "link      {path} -> inode {inode}{} (links now {link_count})",
                    op.path2
                        .as_ref()
                        .map(|p| format!(" (= {p})"))
                        .unwrap_or_default()
                )
            }
        }
        LogicalOp::Unlink {
            inode, link_count, ..
        } => format!("unlink    {path} (inode {inode}, links left {link_count})"),
        LogicalOp::Rename {
            inode,
            replaced,
            exchange,
            ..
        } => {
            let dst = op.path2.clone().unwrap_or_default();
            let extra = match (replaced, exchange) {
                (Some(r), true) => format!(", exchanged with inode {r}"),
                (Some(r), false) => format!(", replacing inode {r}"),
                _ => String::new(),
            };
            format!("rename    {path} -> {dst} (inode {inode}{extra})")
        }
        LogicalOp::Mkdir { inode, .. } => format!("mkdir     {path} (inode {inode})"),
        LogicalOp::Rmdir { inode, .. } => format!("rmdir     {path} (inode {inode})"),
        LogicalOp::Symlink { target, inode, .. } => {
            format!("symlink   {path} -> {target:?} (inode {inode})")
        }
        LogicalOp::Sync { inode, how, range } => {
            let what = match inode {
                Some(i) => format!("{path} (inode {i})"),
                None => "<whole file system>".to_string(),
            };
            let r = range
                .map(|(o, n)| format!(" [{o}, {})", o + n))
                .unwrap_or_default();
            format!(
                "sync      {what}{r} via {}",
                serde_json::to_value(how)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            )
        }
        LogicalOp::Output { data } => format!("output    {}", data_view(data, blob)),
    }
}

/// The frame filter for `--frame-skip REGEX...` given after recording: the bundle's own
/// record-time patterns plus the new ones. None when there are no new ones (keep the
/// locations chosen at record time).
pub fn refilter(
    b: &Bundle,
    extra_skip: &[String],
    extra_keep: &[String],
) -> Result<Option<FrameFilter>, Error> {
    if extra_skip.is_empty() && extra_keep.is_empty() {
        return Ok(None);
    }
    let skip: Vec<String> = b
        .meta
        .frame_skip
        .iter()
        .chain(extra_skip)
        .cloned()
        .collect();
    let keep: Vec<String> = b
        .meta
        .frame_keep
        .iter()
        .chain(extra_keep)
        .cloned()
        .collect();
    frame_filter(&skip, &keep).map(Some)
}

/// The default frame filter plus `--frame-skip` and `--frame-keep` patterns.
pub fn frame_filter(skip: &[String], keep: &[String]) -> Result<FrameFilter, Error> {
    FrameFilter::new(skip)
        .map_err(|e| Error::input(format!("bad --frame-skip pattern: {e}")))?
        .with_keep(keep)
        .map_err(|e| Error::input(format!("bad --frame-keep pattern: {e}")))
}

/// An operation's representative frame: re-selected by `filter`, or the recorded one.
pub fn location(filter: Option<&FrameFilter>, op: &Op) -> Option<intact_model::Frame> {
    match filter {
        Some(f) => f.select(&op.stack).cloned(),
        None => op.loc.clone(),
    }
}

/// Lower-case hex digits of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
