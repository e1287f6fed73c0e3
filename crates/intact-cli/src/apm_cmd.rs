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
            // The provenance is data in each APM's [about] table, not prose here.
            for a in Apm::builtins() {
                println!("{:<17} {}", a.name, a.description);
                if let Some(about) = &a.about {
                    let validation = about
                        .validation
                        .as_deref()
                        .unwrap_or("not validated at block level");
                    println!("{:<17} {}; {validation}", "", about.model.label());
                }
            }
            println!("\nCheck applications under today's kernel models (ext4, xfs, btrfs-linux6);");
            println!(
                "the thesis' models reproduce its study. Write your own in TOML (docs/apm.md)"
            );
            println!("and pass its path to --apm.");
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
