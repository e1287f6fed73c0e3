//! Reads `strace -f -k` output (file argument or stdin) and prints each
//! syscall with its resolved stack and the selected application frame.
//!
//! ```text
//! strace -f -k -o out ./app && cargo run -p intact-symbol --example symbolize -- out
//! ```

use std::io::Read;

use intact_symbol::{parse_strace_frame, FrameFilter, RawFrame, Symbolizer};

fn main() {
    let mut text = String::new();
    match std::env::args().nth(1) {
        Some(path) => text = std::fs::read_to_string(path).expect("read input"),
        None => {
            std::io::stdin()
                .read_to_string(&mut text)
                .expect("read stdin");
        }
    }
    let mut sym = Symbolizer::new();
    let filter = FrameFilter::default();
    let mut header: Option<&str> = None;
    let mut raws: Vec<RawFrame> = Vec::new();
    let mut flush = |header: Option<&str>, raws: &mut Vec<RawFrame>| {
        if let Some(h) = header {
            println!("{h}");
            let stack = sym.resolve_stack(raws);
            let chosen = filter.select_index(&stack);
            for (i, f) in stack.iter().enumerate() {
                let mark = if Some(i) == chosen { "*" } else { " " };
                println!("  {mark} {}", f.display());
            }
        }
        raws.clear();
    };
    for line in text.lines() {
        match parse_strace_frame(line) {
            Some(raw) if line.trim_start().starts_with('>') => raws.push(raw),
            _ => {
                flush(header, &mut raws);
                header = Some(line);
            }
        }
    }
    flush(header, &mut raws);
}
