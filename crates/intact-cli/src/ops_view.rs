//! `intact ops`: the update protocol, for people and for machines.

use crate::{Failure, OpsArgs};
use intact_bundle::Bundle;
use intact_model::Op;
use intact_pipeline::view::{describe, hex, location, refilter, FrameFilter};
use std::io::Write;

pub fn ops(a: OpsArgs) -> Result<u8, Failure> {
    let b = Bundle::open(&a.bundle).map_err(|e| Failure::input(e.to_string()))?;
    let ops = b.ops().map_err(|e| Failure::input(e.to_string()))?;
    let blob = b.data().map_err(|e| Failure::input(e.to_string()))?;
    let filter = refilter(&b, &a.frame_skip, &a.frame_keep)?;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    let res = if a.json {
        print_json(&mut w, &ops, &blob, filter.as_ref())
    } else {
        print_text(&mut w, &b, &ops, &blob, filter.as_ref(), a.stacks)
    };
    match res {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(0),
        Err(e) => {
            return Err(Failure::internal(format!(
                "writing to standard output: {e}"
            )))
        }
    }
    let _ = w.flush();
    let unsupported = b.unsupported().unwrap_or_default();
    if !a.json && !unsupported.is_empty() {
        eprintln!("# not modelled:");
        for u in unsupported {
            eprintln!(
                "#   {} × {}: {} (first at raw trace line {}{})",
                u.count,
                u.syscall,
                u.reason,
                u.first_line,
                u.first_path.map(|p| format!(", {p}")).unwrap_or_default()
            );
        }
    }
    Ok(0)
}

/// One JSON object per operation, with its data in hex and, with new frame patterns, the
/// re-selected location.
fn print_json(
    w: &mut impl Write,
    ops: &[Op],
    blob: &[u8],
    filter: Option<&FrameFilter>,
) -> std::io::Result<()> {
    for op in ops {
        let mut v = serde_json::to_value(op).map_err(std::io::Error::other)?;
        if filter.is_some() {
            v["loc"] = serde_json::to_value(location(filter, op)).map_err(std::io::Error::other)?;
        }
        if let Some(d) = op.op.data() {
            if let Ok(bytes) = d.bytes(blob) {
                v["data_hex"] = serde_json::Value::String(hex(&bytes));
            }
        }
        serde_json::to_writer(&mut *w, &v).map_err(std::io::Error::other)?;
        writeln!(w)?;
    }
    Ok(())
}

/// The numbered protocol for people: call, description, location, process.
fn print_text(
    w: &mut impl Write,
    b: &Bundle,
    ops: &[Op],
    blob: &[u8],
    filter: Option<&FrameFilter>,
    stacks: bool,
) -> std::io::Result<()> {
    writeln!(
        w,
        "# update protocol of `{}` in {}",
        b.meta.command.join(" "),
        b.meta.dir
    )?;
    writeln!(
        w,
        "# {} logical operations from {} system calls",
        ops.len(),
        b.meta.counts.calls
    )?;
    let mut last_call = usize::MAX;
    for op in ops {
        let loc = location(filter, op)
            .map(|f| f.display())
            .unwrap_or_else(|| "?".into());
        let call = if op.call == last_call {
            format!("{:>14}", "\"")
        } else {
            format!("{:>14}", op.syscall)
        };
        last_call = op.call;
        let who = if op.tid != op.pid {
            format!("pid {} tid {}", op.pid, op.tid)
        } else {
            format!("pid {}", op.pid)
        };
        let stream = if op.stream != 0 {
            format!(" stream {:#x}", op.stream)
        } else {
            String::new()
        };
        writeln!(
            w,
            "{:>5}  {call}  {}  @ {loc}  [{who}{stream}]",
            op.id,
            describe(op, blob)
        )?;
        if stacks {
            for f in &op.stack {
                writeln!(w, "{:>24}{}", "", f.display())?;
            }
        }
    }
    Ok(())
}
