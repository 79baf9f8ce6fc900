//! `bulkmem generate completions SHELL | man`: shell completions and a
//! roff man page, made from the same clap definitions the command parses
//! with, so they never drift from it.

use clap::{Args, Command, ValueEnum};
use clap_complete::Shell;

use crate::cli::{runtime, Failure};

#[derive(Args)]
pub struct GenerateArgs {
    /// What to write on stdout.
    #[arg(value_enum)]
    what: What,
    /// The shell, for `completions`: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum, required_if_eq("what", "completions"))]
    shell: Option<Shell>,
}

#[derive(Clone, Copy, ValueEnum)]
enum What {
    /// Shell completions (e.g. `bulkmem generate completions bash >
    /// /etc/bash_completion.d/bulkmem`).
    Completions,
    /// The man page, roff (`bulkmem generate man > bulkmem.1`).
    Man,
}

pub fn cmd(a: GenerateArgs, command: &mut Command) -> Result<(), Failure> {
    // Made in memory first: clap_complete panics on a failed write, and
    // `out` turns one into an error.
    let mut out = Vec::new();
    match a.what {
        What::Completions => {
            let shell = a.shell.expect("clap requires a shell for completions");
            clap_complete::generate(shell, command, "bulkmem", &mut out);
        }
        What::Man => clap_mangen::Man::new(command.clone())
            .render(&mut out)
            .map_err(|e| runtime(format!("cannot write the man page: {e}")))?,
    }
    crate::out::write_bytes(&out).map_err(crate::out::failed)
}
