//! Symbolization of `strace -f -k` stacks for intact.
//!
//! `strace -k` prints a stack after each traced system call, one frame per
//! line:
//!
//! ```text
//!  > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x10) [0xf8350]
//!  > /tmp/st/t(main+0x5b) [0x12cb]
//! ```
//!
//! * [`parse_strace_frame`] turns such a line into a [`RawFrame`].
//! * [`Symbolizer`] resolves raw frames in-process (via `addr2line`/`gimli`)
//!   to [`Frame`]s with function, source file and line, expanding inlined
//!   calls (innermost first). The bracketed number is a file offset; it is
//!   converted to a virtual address through the ELF `PT_LOAD` program
//!   headers, so PIE executables, shared objects and non-PIE executables all
//!   work. Return addresses (every frame but the innermost) are adjusted by
//!   [`SymbolizerOptions::return_address_adjustment`] (default 1) before
//!   lookup. Loaded binaries and per-address results are cached. Binaries
//!   without debug info yield symbol names only; missing binaries yield what
//!   strace printed. Separate debug files are found via build-id and
//!   `.gnu_debuglink` under `/usr/lib/debug`.
//! * [`FrameFilter`] picks the application's frame from a resolved stack by
//!   skipping library/runtime frames.
//!
//! ```no_run
//! use intact_symbol::{parse_strace_frame, FrameFilter, Symbolizer};
//!
//! let text = " > /usr/lib/x86_64-linux-gnu/libc.so.6(__write+0x10) [0xf8350]\n > /tmp/st/t(main+0x5b) [0x12cb]\n";
//! let raws: Vec<_> = text.lines().filter_map(parse_strace_frame).collect();
//! let mut sym = Symbolizer::new();
//! let stack = sym.resolve_stack(&raws);
//! let filter = FrameFilter::new(&[]).unwrap();
//! if let Some(app) = filter.select(&stack) {
//!     println!("{}", app.display());
//! }
//! ```

mod filter;
mod parse;
mod symbolizer;

pub use filter::FrameFilter;
pub use intact_model::frame::{clean_path, Frame, Lang};
pub use parse::{parse_strace_frame, RawFrame};
pub use symbolizer::{AddressKind, Symbolizer, SymbolizerOptions};
