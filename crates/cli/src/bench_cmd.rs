//! `pgtier bench tatp` (placeholder until the workload lands).

#[derive(clap::Args)]
pub struct TatpArgs {}

pub fn run(_args: TatpArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet available")
}
