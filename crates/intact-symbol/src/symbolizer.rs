//! In-process symbolization of [`RawFrame`]s with per-binary and
//! per-address caches.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

use crate::parse::RawFrame;
use intact_model::frame::{clean_path, Frame, Lang};

/// How to interpret [`RawFrame::addr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AddressKind {
    /// A file offset (strace's libunwind backend, the common case).
    FileOffset,
    /// A virtual address in the ELF's own address space (strace's libdw
    /// backend, or addresses already converted by the caller).
    VirtualAddress,
    /// Decide per frame: prefer the file-offset interpretation, but when
    /// strace printed `symbol+0xoff` use whichever interpretation is
    /// consistent with the symbol table (`symbol start + off == address`).
    #[default]
    Auto,
}

/// Tuning knobs for [`Symbolizer`].
#[derive(Clone, Debug)]
pub struct SymbolizerOptions {
    /// Subtracted from the virtual address of every frame except the
    /// innermost one before lookup, so that a return address maps to the
    /// call instruction (and hence the call's line / inlining context).
    /// Default 1. (strace's libdw backend already subtracts 1 itself; a
    /// second subtraction is harmless since call instructions are longer
    /// than 2 bytes.)
    pub return_address_adjustment: u64,
    /// How to interpret the bracketed number. Default [`AddressKind::Auto`].
    pub address_kind: AddressKind,
    /// Global debug directories searched for separate debug info, via
    /// `<dir>/.build-id/xx/yyyy.debug` and `<dir>/<binary dir>/<debuglink>`.
    /// Default `["/usr/lib/debug"]`.
    pub debug_dirs: Vec<PathBuf>,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            return_address_adjustment: 1,
            address_kind: AddressKind::Auto,
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
        }
    }
}

/// Resolves strace frames to functions / source lines.
///
/// Binaries are opened (memory-mapped) once and kept; results are cached per
/// `(binary, address, innermost)`, so a repeated frame costs two hash
/// lookups plus cloning the result. Unreadable or missing binaries are
/// remembered as such and yield frames containing only what strace printed.
pub struct Symbolizer {
    opts: SymbolizerOptions,
    binaries: HashMap<String, BinaryEntry>,
}

struct BinaryEntry {
    /// `None` when the binary could not be loaded.
    obj: Option<Box<LoadedBinary>>,
    cache: HashMap<(u64, bool), CachedFrames>,
}

struct CachedFrames {
    /// The strace-provided part the result may depend on (fallback name).
    symbol: Option<String>,
    offset_in_symbol: Option<u64>,
    frames: Vec<Frame>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    pub fn new() -> Self {
        Self::with_options(SymbolizerOptions::default())
    }

    pub fn with_options(opts: SymbolizerOptions) -> Self {
        Symbolizer {
            opts,
            binaries: HashMap::new(),
        }
    }

    pub fn options(&self) -> &SymbolizerOptions {
        &self.opts
    }

    /// Resolves one frame. `innermost` must be true for the first frame of a
    /// stack (the syscall site: no return-address adjustment).
    ///
    /// Returns at least one frame; several when functions were inlined,
    /// innermost first, the last one being the function that physically
    /// contains the code.
    pub fn resolve(&mut self, raw: &RawFrame, innermost: bool) -> Vec<Frame> {
        if !looks_like_path(&raw.binary) {
            return vec![fallback_frame(raw, None)];
        }
        let entry = match self.binaries.get_mut(raw.binary.as_str()) {
            Some(e) => e,
            None => {
                let obj = LoadedBinary::load(Path::new(&raw.binary), &self.opts.debug_dirs);
                self.binaries
                    .entry(raw.binary.clone())
                    .or_insert(BinaryEntry {
                        obj,
                        cache: HashMap::new(),
                    })
            }
        };
        let Some(obj) = entry.obj.as_deref() else {
            return vec![fallback_frame(raw, None)];
        };
        let key = (raw.addr, innermost);
        if let Some(c) = entry.cache.get(&key) {
            if c.symbol == raw.symbol && c.offset_in_symbol == raw.offset_in_symbol {
                return c.frames.clone();
            }
            // Same address, different strace annotation (should not happen
            // within one trace): compute without disturbing the cache.
            return obj.lookup(raw, innermost, &self.opts);
        }
        let frames = obj.lookup(raw, innermost, &self.opts);
        entry.cache.insert(
            key,
            CachedFrames {
                symbol: raw.symbol.clone(),
                offset_in_symbol: raw.offset_in_symbol,
                frames: frames.clone(),
            },
        );
        frames
    }

    /// Resolves a whole stack (innermost frame first, as strace prints it);
    /// the first frame is treated as the innermost. Inlined frames are
    /// expanded in place, so the result can be longer than the input.
    pub fn resolve_stack(&mut self, raws: &[RawFrame]) -> Vec<Frame> {
        let mut out = Vec::with_capacity(raws.len());
        for (i, raw) in raws.iter().enumerate() {
            out.extend(self.resolve(raw, i == 0));
        }
        out
    }

    /// Drops all cached binaries and results.
    pub fn clear(&mut self) {
        self.binaries.clear();
    }

    /// Number of distinct binaries seen (loaded or not).
    pub fn cached_binaries(&self) -> usize {
        self.binaries.len()
    }

    /// Whether `binary` was opened successfully (`None` if never seen).
    pub fn is_loaded(&self, binary: &str) -> Option<bool> {
        self.binaries.get(binary).map(|e| e.obj.is_some())
    }
}

/// strace's error placeholders ("unexpected_backtracing_error") and pseudo
/// mappings ("[vdso]") are not files; do not try to open them.
fn looks_like_path(binary: &str) -> bool {
    binary.contains('/') && !binary.starts_with('[')
}

fn demangle(name: &str) -> String {
    // The spelled-out std::string makes C++ signatures unreadable in one-line locations.
    addr2line::demangle_auto(Cow::Borrowed(name), None).replace(
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >",
        "std::string",
    )
}

/// A frame with only what strace printed (plus optionally an ELF symbol).
fn fallback_frame(raw: &RawFrame, elf_symbol: Option<&str>) -> Frame {
    let function = raw
        .symbol
        .as_deref()
        .filter(|s| !s.is_empty())
        .or(elf_symbol)
        .map(demangle);
    Frame {
        binary: raw.binary.clone(),
        function,
        file: None,
        line: None,
        lang: Lang::Native,
        offset: looks_like_path(&raw.binary).then_some(raw.addr),
    }
}

/// One `PT_LOAD` program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoadSegment {
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
    pub memsz: u64,
}

/// Converts a file offset to a virtual address using the `PT_LOAD`
/// segment whose `[p_offset, p_offset + p_filesz)` contains it.
pub(crate) fn offset_to_vaddr(segments: &[LoadSegment], off: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| off >= s.offset && off - s.offset < s.filesz)
        .map(|s| off - s.offset + s.vaddr)
}

fn in_vaddr_range(segments: &[LoadSegment], addr: u64) -> bool {
    segments
        .iter()
        .any(|s| addr >= s.vaddr && addr - s.vaddr < s.memsz)
}

struct LoadedBinary {
    /// The binary itself: symbol table (.symtab or .dynsym) and its own DWARF.
    main: addr2line::Loader,
    /// Separate debug file (build-id / debuglink), if found.
    debug: Option<addr2line::Loader>,
    segments: Vec<LoadSegment>,
    /// Sizes of the binary's function symbols, by (mangled) name: a name is only trusted
    /// for addresses inside the function. (A stripped binary's few exported symbols are
    /// otherwise "nearest" to most of its code: all of /usr/bin/git became `error`.)
    sym_sizes: HashMap<String, u64>,
}

/// Facts gathered from the binary's headers before handing it to addr2line.
struct Probe {
    segments: Vec<LoadSegment>,
    has_dwarf: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<Vec<u8>>,
    altlink: Option<(Vec<u8>, Vec<u8>)>,
    sym_sizes: HashMap<String, u64>,
}

fn probe_file(path: &Path) -> Option<Probe> {
    let file = File::open(path).ok()?;
    // SAFETY: read-only private mapping; the mapping is dropped before this
    // function returns and nothing escapes it except owned copies. (A
    // concurrent truncation of the file could SIGBUS, as with any mmap-based
    // symbolizer, addr2line's loader included.)
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let obj = object::File::parse(&*map).ok()?;
    let segments = obj
        .segments()
        .map(|seg| {
            let (offset, filesz) = seg.file_range();
            LoadSegment {
                offset,
                filesz,
                vaddr: seg.address(),
                memsz: seg.size(),
            }
        })
        .collect();
    let has_dwarf = obj
        .section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
        || obj
            .section_by_name(".zdebug_info")
            .is_some_and(|s| s.size() > 0);
    let mut sym_sizes: HashMap<String, u64> = HashMap::new();
    for sym in obj.symbols().chain(obj.dynamic_symbols()) {
        if sym.kind() == object::SymbolKind::Text && sym.size() > 0 {
            if let Ok(name) = sym.name() {
                let e = sym_sizes.entry(name.to_string()).or_default();
                *e = (*e).max(sym.size());
            }
        }
    }
    Some(Probe {
        segments,
        has_dwarf,
        sym_sizes,
        build_id: obj.build_id().ok().flatten().map(<[u8]>::to_vec),
        debuglink: obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(n, _crc)| n.to_vec()),
        altlink: obj
            .gnu_debugaltlink()
            .ok()
            .flatten()
            .map(|(n, id)| (n.to_vec(), id.to_vec())),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes_to_path(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(b))
}

fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    if id.len() < 2 {
        return None;
    }
    Some(
        dir.join(".build-id")
            .join(hex(&id[..1]))
            .join(format!("{}.debug", hex(&id[1..]))),
    )
}

/// Finds a separate debug file for `path` (GDB's search rules, minus CRC checks).
fn find_debug_file(path: &Path, p: &Probe, debug_dirs: &[PathBuf]) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(id) = &p.build_id {
        for d in debug_dirs {
            candidates.extend(build_id_path(d, id));
        }
    }
    if let Some(link) = &p.debuglink {
        let name = bytes_to_path(link);
        let dir = path.parent().unwrap_or(Path::new("/"));
        candidates.push(dir.join(&name));
        candidates.push(dir.join(".debug").join(&name));
        for d in debug_dirs {
            candidates.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(&name));
        }
    }
    let canon = std::fs::canonicalize(path).ok();
    candidates.into_iter().find(|c| {
        c.is_file()
            && std::fs::canonicalize(c).ok() != canon
            // If both have a build-id they must agree.
            && match (&p.build_id, probe_file(c)) {
                (Some(want), Some(dp)) => dp.build_id.as_ref().is_none_or(|got| got == want),
                (_, Some(_)) => true,
                (_, None) => false,
            }
    })
}

/// Finds the dwz supplementary file (`.gnu_debugaltlink`) for a DWARF file.
fn find_sup_file(dwarf_path: &Path, p: &Probe, debug_dirs: &[PathBuf]) -> Option<PathBuf> {
    let (name, id) = p.altlink.as_ref()?;
    let name = bytes_to_path(name);
    let mut candidates = Vec::new();
    if name.is_absolute() {
        candidates.push(name.clone());
    } else if let Some(dir) = dwarf_path.parent() {
        candidates.push(dir.join(&name));
    }
    for d in debug_dirs {
        candidates.extend(build_id_path(d, id));
    }
    candidates.into_iter().find(|c| c.is_file())
}

fn new_loader(path: &Path, sup: Option<&Path>) -> Option<addr2line::Loader> {
    catch_unwind(|| addr2line::Loader::new_with_sup(path, sup).ok())
        .ok()
        .flatten()
}

impl LoadedBinary {
    fn load(path: &Path, debug_dirs: &[PathBuf]) -> Option<Box<Self>> {
        catch_unwind(AssertUnwindSafe(|| Self::load_inner(path, debug_dirs)))
            .ok()
            .flatten()
            .map(Box::new)
    }

    fn load_inner(path: &Path, debug_dirs: &[PathBuf]) -> Option<Self> {
        let probe = probe_file(path)?;
        let (main, debug) = if probe.has_dwarf {
            let sup = find_sup_file(path, &probe, debug_dirs);
            let main = new_loader(path, sup.as_deref()).or_else(|| new_loader(path, None))?;
            (main, None)
        } else {
            let main = new_loader(path, None)?;
            let debug = find_debug_file(path, &probe, debug_dirs).and_then(|dpath| {
                let sup = probe_file(&dpath).and_then(|dp| find_sup_file(&dpath, &dp, debug_dirs));
                new_loader(&dpath, sup.as_deref()).or_else(|| new_loader(&dpath, None))
            });
            (main, debug)
        };
        Some(LoadedBinary {
            main,
            debug,
            segments: probe.segments,
            sym_sizes: probe.sym_sizes,
        })
    }

    fn dwarf(&self) -> &addr2line::Loader {
        self.debug.as_ref().unwrap_or(&self.main)
    }

    fn symbol_info(&self, vaddr: u64) -> Option<(String, u64)> {
        let from = |l: &addr2line::Loader| {
            l.find_symbol_info(vaddr)
                .map(|s| (s.name().to_string(), s.address()))
        };
        self.debug
            .as_ref()
            .and_then(from)
            .or_else(|| from(&self.main))
    }

    fn symbol_start(&self, vaddr: u64) -> Option<u64> {
        let from = |l: &addr2line::Loader| l.find_symbol_info(vaddr).map(|s| s.address());
        self.debug
            .as_ref()
            .and_then(from)
            .or_else(|| from(&self.main))
    }

    /// Unadjusted virtual address for the raw frame.
    fn to_vaddr(&self, raw: &RawFrame, kind: AddressKind) -> Option<u64> {
        if self.segments.is_empty() {
            // Not a loadable ELF (e.g. a relocatable object): take it as is.
            return Some(raw.addr);
        }
        let from_offset = offset_to_vaddr(&self.segments, raw.addr);
        match kind {
            AddressKind::FileOffset => from_offset,
            AddressKind::VirtualAddress => Some(raw.addr),
            AddressKind::Auto => {
                let identity = in_vaddr_range(&self.segments, raw.addr).then_some(raw.addr);
                if let (Some(_), Some(off)) = (&raw.symbol, raw.offset_in_symbol) {
                    let consistent = |v: u64| {
                        self.symbol_start(v)
                            .is_some_and(|start| start.checked_add(off) == Some(v))
                    };
                    if let Some(v) = from_offset.filter(|&v| consistent(v)) {
                        return Some(v);
                    }
                    if let Some(v) = identity.filter(|&v| consistent(v)) {
                        return Some(v);
                    }
                }
                from_offset.or(identity)
            }
        }
    }

    /// Whether `name` at `off` bytes into it can be the function: false when the symbol
    /// table knows the function is shorter.
    fn name_fits(&self, name: &str, off: u64) -> bool {
        self.sym_sizes.get(name).is_none_or(|&size| off < size)
    }

    fn lookup(&self, raw: &RawFrame, innermost: bool, opts: &SymbolizerOptions) -> Vec<Frame> {
        let trusted;
        let raw = match (&raw.symbol, raw.offset_in_symbol) {
            (Some(name), Some(off)) if !self.name_fits(name, off) => {
                trusted = RawFrame {
                    symbol: None,
                    offset_in_symbol: None,
                    ..raw.clone()
                };
                &trusted
            }
            _ => raw,
        };
        let Some(vaddr) = self.to_vaddr(raw, opts.address_kind) else {
            return vec![fallback_frame(raw, None)];
        };
        let probe = if innermost {
            vaddr
        } else {
            vaddr.saturating_sub(opts.return_address_adjustment)
        };
        let mut frames =
            catch_unwind(AssertUnwindSafe(|| self.dwarf_frames(raw, probe))).unwrap_or_default();
        if frames.is_empty() {
            let elf = self
                .symbol_info(probe)
                .filter(|(name, start)| self.name_fits(name, probe.saturating_sub(*start)))
                .map(|(name, _)| name);
            return vec![fallback_frame(raw, elf.as_deref())];
        }
        // The outermost entry is the physical (non-inlined) function; if the
        // DWARF did not name it, fall back to the symbol tables.
        if let Some(last) = frames.last_mut() {
            if last.function.is_none() {
                let elf = self.symbol_info(probe).map(|(name, _)| name);
                last.function = fallback_frame(raw, elf.as_deref()).function;
            }
        }
        frames
    }

    fn dwarf_frames(&self, raw: &RawFrame, probe: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        let Ok(mut iter) = self.dwarf().find_frames(probe) else {
            return out;
        };
        while let Ok(Some(f)) = iter.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.demangle().ok())
                .map(Cow::into_owned)
                .filter(|s| !s.is_empty());
            let (file, line) = match &f.location {
                Some(loc) => (loc.file.map(clean_path), loc.line.filter(|&l| l != 0)),
                None => (None, None),
            };
            if function.is_none() && file.is_none() {
                continue;
            }
            let offset = line.is_none().then_some(raw.addr);
            out.push(Frame {
                binary: raw.binary.clone(),
                function,
                file,
                line,
                lang: Lang::Native,
                offset,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, filesz: u64, vaddr: u64, memsz: u64) -> LoadSegment {
        LoadSegment {
            offset,
            filesz,
            vaddr,
            memsz,
        }
    }

    #[test]
    fn offset_conversion_pie_and_exec() {
        // Typical PIE: RW segment has offset != vaddr.
        let pie = [
            seg(0, 0x618, 0, 0x618),
            seg(0x1000, 0x175, 0x1000, 0x175),
            seg(0x2dd0, 0x248, 0x3dd0, 0x250),
        ];
        assert_eq!(offset_to_vaddr(&pie, 0x1156), Some(0x1156));
        assert_eq!(offset_to_vaddr(&pie, 0x2dd8), Some(0x3dd8));
        assert_eq!(offset_to_vaddr(&pie, 0x1175), None);
        // ET_EXEC at 0x400000.
        let exec = [
            seg(0, 0x4f0, 0x400000, 0x4f0),
            seg(0x1000, 0x161, 0x401000, 0x161),
        ];
        assert_eq!(offset_to_vaddr(&exec, 0x1143), Some(0x401143));
        assert!(in_vaddr_range(&exec, 0x401143));
        assert!(!in_vaddr_range(&exec, 0x1143));
    }

    #[test]
    fn missing_binary_uses_strace_symbol() {
        let mut s = Symbolizer::new();
        let raw = RawFrame {
            binary: "/nonexistent/dir/libnope.so".into(),
            symbol: Some("_ZN3foo3barEi".into()),
            offset_in_symbol: Some(0x10),
            addr: 0x1234,
        };
        let f = s.resolve(&raw, false);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].function.as_deref(), Some("foo::bar(int)"));
        assert_eq!(f[0].binary, "/nonexistent/dir/libnope.so");
        assert_eq!(f[0].file, None);
        assert_eq!(s.is_loaded("/nonexistent/dir/libnope.so"), Some(false));
        // Second call hits the negative cache.
        assert_eq!(s.resolve(&raw, false), f);
        assert_eq!(s.cached_binaries(), 1);
    }

    #[test]
    fn rust_symbols_are_demangled_without_hash() {
        let mut s = Symbolizer::new();
        let raw = RawFrame {
            binary: "/nonexistent/x".into(),
            symbol: Some("_ZN4core3fmt5write17h0123456789abcdefE".into()),
            offset_in_symbol: None,
            addr: 1,
        };
        assert_eq!(
            s.resolve(&raw, true)[0].function.as_deref(),
            Some("core::fmt::write")
        );
    }

    #[test]
    fn cxx_strings_are_abbreviated() {
        assert_eq!(
            demangle("_ZN7leveldb14SetCurrentFileEPNS_3EnvERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEm"),
            "leveldb::SetCurrentFile(leveldb::Env*, std::string const&, unsigned long)"
        );
    }

    #[test]
    fn unwind_error_frames_pass_through() {
        let mut s = Symbolizer::new();
        let raw = crate::parse_strace_frame(" > unexpected_backtracing_error [0x7f00]").unwrap();
        let f = s.resolve_stack(&[raw]);
        assert_eq!(f, vec![Frame::unknown("unexpected_backtracing_error")]);
        assert_eq!(s.cached_binaries(), 0);
    }

    #[test]
    fn symbolizer_is_send() {
        fn assert_send<T: Send>() {}
        assert_send::<Symbolizer>();
    }
}
