//! Sizes on the command line (`--size 1G`, `-o dirty_limit=64M`): one parser for every
//! subcommand (its own module so that `fs_cmd`, `fs_mount` and `blk_cmd` need not import
//! each other for it).

/// A byte count with an optional K, M, G or T suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| {
        format!("size {s:?}: expected a number with an optional K, M, G or T suffix")
    })?;
    n.checked_mul(mult)
        .ok_or(format!("size {s:?} is too large"))
}
