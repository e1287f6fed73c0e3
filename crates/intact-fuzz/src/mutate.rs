//! Mutations of seed inputs: the kinds of damage a hand-edited or cut-off file shows
//! (lines cut short, arguments deleted or duplicated, numbers replaced by boundary values,
//! bytes flipped, lines dropped, repeated or swapped). Deterministic for a given seed, so a
//! run is reproducible from its command line.

/// xorshift64*: small, fast, and reproducible; quality is ample for choosing mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 spreads nearby seeds apart; zero is xorshift's fixed point.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "below(0)");
        (self.next_u64() % n as u64) as usize
    }
}

/// Numbers at the edges of the types and limits a parser must bound.
pub const BOUNDARIES: &[&str] = &[
    "0",
    "1",
    "-1",
    "-2",
    "4095",
    "4096",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "1099511627776",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551610",
    "18446744073709551615",
    "18446744073709551616",
    "0x7fffffffffffffff",
    "0xffffffffffffffff",
    "99999999999999999999999999",
    "1e309",
];

/// Spans of decimal or hex numbers (with a leading minus) in `s`.
fn numbers(s: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i].is_ascii_digit() {
            let start = if i > 0 && s[i - 1] == b'-' { i - 1 } else { i };
            let mut j = i;
            while j < s.len() && (s[j].is_ascii_hexdigit() || s[j] == b'x') {
                j += 1;
            }
            out.push((start, j));
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// Spans of the top-level arguments of the first `name(...)` in a line: split at `, `.
fn arguments(s: &[u8]) -> Vec<(usize, usize)> {
    let Some(open) = s.iter().position(|&b| b == b'(') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut depth, mut start, mut quoted) = (0i32, open + 1, false);
    let mut i = open + 1;
    while i < s.len() {
        match s[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b'(' | b'[' | b'{' if !quoted => depth += 1,
            b')' | b']' | b'}' if !quoted && depth > 0 => depth -= 1,
            b')' if !quoted => {
                out.push((start.min(i), i));
                return out;
            }
            b',' if !quoted && depth == 0 => {
                out.push((start.min(i), i));
                start = (i + 2).min(s.len());
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One mutation of one line.
fn mutate_line(line: &mut Vec<u8>, rng: &mut Rng) {
    match rng.below(8) {
        0 if !line.is_empty() => {
            let at = rng.below(line.len());
            line.truncate(at);
        }
        1 | 2 => {
            let args = arguments(line);
            if args.is_empty() {
                return;
            }
            let (s, e) = args[rng.below(args.len())];
            if rng.below(2) == 0 {
                // Delete the argument and one separator next to it.
                let (s, e) = if line[e..].starts_with(b", ") {
                    (s, e + 2)
                } else if s >= 2 && &line[s - 2..s] == b", " {
                    (s - 2, e)
                } else {
                    (s, e)
                };
                line.drain(s..e);
            } else {
                let arg = line[s..e].to_vec();
                let mut ins = arg;
                ins.extend_from_slice(b", ");
                line.splice(s..s, ins);
            }
        }
        3..=5 => {
            let nums = numbers(line);
            if nums.is_empty() {
                return;
            }
            let (s, e) = nums[rng.below(nums.len())];
            let v = BOUNDARIES[rng.below(BOUNDARIES.len())];
            line.splice(s..e, v.bytes());
        }
        6 if !line.is_empty() => {
            let at = rng.below(line.len());
            line[at] ^= 1 << rng.below(8);
        }
        _ => {
            let at = rng.below(line.len() + 1);
            let b = b"()[]{},\"\\= <>|-0x9"[rng.below(18)];
            line.insert(at, b);
        }
    }
}

/// Mutates a line-oriented text (strace trace, TOML, JSON lines): 1 to 4 mutations, each
/// on a line or on the order of lines.
pub fn mutate_text(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = seed.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..1 + rng.below(4) {
        let n = lines.len();
        match rng.below(10) {
            0 => {
                lines.remove(rng.below(n));
            }
            1 => {
                let l = lines[rng.below(n)].clone();
                lines.insert(rng.below(n + 1), l);
            }
            2 => lines.swap(rng.below(n), rng.below(n)),
            _ => mutate_line(&mut lines[rng.below(n)], rng),
        }
        if lines.is_empty() {
            lines.push(Vec::new());
        }
    }
    lines.join(&b'\n')
}

/// Mutates binary data: byte flips, 4- and 8-byte fields replaced by boundary values,
/// truncation, duplicated ranges.
pub fn mutate_bytes(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(0);
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next_u64() as u8,
            2 => {
                let v: [u64; 6] = [0, 1, u64::MAX, i64::MAX as u64, 1 << 40, u32::MAX as u64];
                let v = v[rng.below(v.len())].to_le_bytes();
                let w = if rng.below(2) == 0 { 4 } else { 8 };
                let end = (at + w).min(b.len());
                b[at..end].copy_from_slice(&v[..end - at]);
            }
            3 => b.truncate(at),
            4 => {
                let end = (at + 1 + rng.below(64)).min(b.len());
                let chunk = b[at..end].to_vec();
                b.splice(at..at, chunk);
            }
            _ => {
                b.remove(at);
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_split_at_top_level() {
        let l = br#"write(3</a>, "x, y", 1) = 1"#;
        let a: Vec<&[u8]> = arguments(l).iter().map(|&(s, e)| &l[s..e]).collect();
        assert_eq!(a, vec![&b"3</a>"[..], br#""x, y""#, b"1"]);
        assert!(arguments(b"+++ exited with 0 +++").is_empty());
    }

    #[test]
    fn mutations_are_reproducible_and_change_the_input() {
        let seed = b"1 write(3</a>, \"x\", 1) = 1\n1 fsync(3</a>) = 0\n";
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let mut changed = 0;
        for _ in 0..100 {
            let x = mutate_text(seed, &mut a);
            assert_eq!(x, mutate_text(seed, &mut b));
            changed += usize::from(x != seed);
        }
        assert!(
            changed > 50,
            "only {changed} of 100 mutations changed the seed"
        );
    }
}
