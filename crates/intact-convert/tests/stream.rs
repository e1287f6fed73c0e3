//! `convert_into` hands each operation to its sink as it is made (issue 29: a
//! million-call trace's operations are not all held): the same operations as `convert`,
//! in order, and a sink's error stops the conversion with the operation's id.

use intact_convert::{convert, convert_into, ConvertError, ConvertOptions};
use intact_model::{Op, State};

fn seed_trace() -> intact_trace::Trace {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../intact-fuzz/seeds/strace/basic.raw"
    );
    let raw = std::fs::read(path).expect("the fuzz seed is in the repository");
    intact_trace::parse_trace(&raw).expect("the seed parses")
}

fn options() -> ConvertOptions {
    ConvertOptions {
        root_abs: "/tmp/intact-seed/work".into(),
        cwd: "/tmp/intact-seed/work".into(),
        ignore: intact_model::IgnoreSet::new(&[]).unwrap(),
        filter: intact_symbol::FrameFilter::new(&[]).unwrap(),
        symbolize: false,
        stdout: None,
    }
}

#[test]
fn the_sink_gets_what_convert_keeps() {
    let trace = seed_trace();
    let kept = convert(&trace, State::empty(), &options()).unwrap();
    assert!(kept.ops.len() > 3, "the seed makes operations");
    let mut streamed: Vec<Op> = Vec::new();
    let conv = convert_into(&trace, State::empty(), &options(), &mut |op| {
        streamed.push(op);
        Ok(())
    })
    .unwrap();
    assert!(conv.ops.is_empty(), "convert_into keeps none");
    assert_eq!(conv.op_count, kept.ops.len());
    assert_eq!(streamed, kept.ops);
    assert_eq!(conv.op_names.values().sum::<usize>(), conv.op_count);
    assert_eq!(conv.op_names, kept.op_names);
}

#[test]
fn a_failing_sink_stops_the_conversion() {
    let trace = seed_trace();
    let mut taken = 0;
    let err = convert_into(&trace, State::empty(), &options(), &mut |op| {
        taken += 1;
        match op.id {
            1 => Err("disk full".into()),
            _ => Ok(()),
        }
    })
    .unwrap_err();
    assert!(matches!(err, ConvertError::Output { op: 1, .. }), "{err}");
    assert_eq!(taken, 2, "nothing after the refused operation");
    assert!(!err.is_malformed_input());
}

/// The raw file read as the conversion goes gives what the parsed trace gives.
#[test]
fn a_raw_file_converts_as_its_parsed_trace() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../intact-fuzz/seeds/strace/basic.raw"
    );
    let parsed = convert(&seed_trace(), State::empty(), &options()).unwrap();
    let file = intact_convert::RawTraceFile::new(std::path::Path::new(path));
    let streamed = convert(&file, State::empty(), &options()).unwrap();
    assert_eq!(streamed.ops, parsed.ops);
    assert_eq!(streamed.events, parsed.events);
    assert_eq!(streamed.trace_end, parsed.trace_end);
    assert_eq!(streamed.blob, parsed.blob);
    let raw = std::fs::read(path).unwrap();
    let newlines = raw.iter().filter(|&&b| b == b'\n').count();
    assert_eq!(streamed.trace_end.newlines, newlines);
}

/// A line that does not parse stops the conversion with its line number (an input error
/// for `reconvert`, which names it).
#[test]
fn a_bad_line_in_a_raw_file_is_a_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.raw");
    std::fs::write(&path, b"7 fsync(3</a>) = 0\nnot a pid\n").unwrap();
    let file = intact_convert::RawTraceFile::new(&path);
    let err = convert(&file, State::empty(), &options()).unwrap_err();
    assert!(matches!(err, ConvertError::Parse(_)), "{err}");
    assert_eq!(err.line(), 2);
    let gone = intact_convert::RawTraceFile::new(&dir.path().join("missing.raw"));
    let err = convert(&gone, State::empty(), &options()).unwrap_err();
    assert!(matches!(err, ConvertError::Read { .. }), "{err}");
}
