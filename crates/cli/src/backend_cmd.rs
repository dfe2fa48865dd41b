//! `pgtier backend start|stop|status` (placeholder until the harness lands).

use clap::Subcommand;

#[derive(Subcommand)]
pub enum BackendCommand {
    /// Start the private PostgreSQL cluster.
    Start,
}

pub fn run(command: BackendCommand) -> anyhow::Result<()> {
    match command {
        BackendCommand::Start => anyhow::bail!("not yet available"),
    }
}
