//! `pgtier bench compare A.json B.json` (placeholder until charts land).

#[derive(clap::Args)]
pub struct CompareArgs {}

pub fn run(_args: CompareArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet available")
}
