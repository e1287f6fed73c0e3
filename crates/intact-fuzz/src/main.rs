//! `intact-fuzz [--target strace|apm|bundle|report|blklog|all] [--inputs N] [--seed S]
//! [--first I] [--loud]`: N mutated inputs per target; exit 1 if any panicked, 2 on bad
//! arguments. Replay one input with `--first I --inputs 1 --loud` (prints the panic).

use intact_fuzz::targets::{self, Fixture, Target};
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    targets: Vec<Target>,
    inputs: u64,
    seed: u64,
    first: u64,
    loud: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        targets: targets::ALL.to_vec(),
        inputs: 10_000,
        seed: 1,
        first: 0,
        loud: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--loud" {
            a.loud = true;
            continue;
        }
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--target" if v == "all" => a.targets = targets::ALL.to_vec(),
            "--target" => a.targets = vec![Target::parse(&v).ok_or(format!("unknown target {v}"))?],
            "--inputs" => a.inputs = num()?,
            "--seed" => a.seed = num()?,
            "--first" => a.first = num()?,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("intact-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let fx = match Fixture::load() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("intact-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let mut panics = 0;
    for t in a.targets {
        let t0 = Instant::now();
        let st = intact_fuzz::run(&fx, t, a.seed, a.first, a.inputs, a.loud);
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "{:7} inputs {} (from {}, seed {}): accepted {}, rejected {}, panics {}; {:.1} s, {:.0} inputs/s",
            t.name(),
            st.inputs,
            a.first,
            a.seed,
            st.accepted,
            st.rejected,
            st.panic_count,
            secs,
            st.inputs as f64 / secs.max(1e-9)
        );
        for (i, msg) in &st.panics {
            println!("  input {i}: {msg}");
        }
        panics += st.panic_count;
    }
    if panics > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
