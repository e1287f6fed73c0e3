//! `intact apm list | show`: the APMs the explorer knows.

use crate::Failure;
use intact_apm::{Apm, Class, When};

#[derive(clap::Subcommand)]
pub enum ApmCmd {
    /// List the built-in APMs.
    List,
    /// Print an APM's definition (a built-in name or a .toml file), after checking it.
    Show {
        /// Built-in name or path of a .toml file.
        name: String,
    },
    /// Print the classes and relations APM rules can use.
    Vocabulary,
}

pub fn apm(cmd: ApmCmd) -> Result<u8, Failure> {
    match cmd {
        ApmCmd::List => {
            for a in Apm::builtins() {
                println!("{:<14} {}", a.name, a.description);
            }
            println!("\nWrite your own in TOML (docs/apm.md) and pass its path to --apm.");
        }
        ApmCmd::Show { name } => {
            let a = Apm::resolve(&name).map_err(|e| Failure::input(e.to_string()))?;
            print!("{}", a.source);
        }
        ApmCmd::Vocabulary => {
            println!("classes (before/after/before_except/after_except):");
            for (n, _, d) in Class::ALL {
                println!("  {n:<10} {d}");
            }
            println!("relations (when):");
            for (n, _) in When::ALL {
                println!("  {n}");
            }
        }
    }
    Ok(0)
}
