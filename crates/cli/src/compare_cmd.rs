//! `pgtier bench compare BASELINE.json CANDIDATE.json`: the same workload
//! run twice (PostgreSQL alone, then through pgtier), reported as ratios and
//! drawn side by side, as DESIGN.md §4 asks of every performance claim.

use std::path::{Path, PathBuf};

use anyhow::Context;
use pgtier_bench::compare::{compare, draw_comparison_chart, load_result};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Result file of the baseline run (e.g. PostgreSQL alone)
    #[arg(value_name = "BASELINE.json")]
    baseline: PathBuf,
    /// Result file of the candidate run (e.g. pgtier), measured against the baseline
    #[arg(value_name = "CANDIDATE.json")]
    candidate: PathBuf,
    /// Compare latencies at this thread count only [default: every thread count both runs measured]
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Directory for the charts [default: the candidate file's directory]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let baseline = load_result(&args.baseline)?;
    let candidate = load_result(&args.candidate)?;

    let comparison = compare(&baseline, &candidate);
    comparison.require_common()?;
    let comparison = match args.threads {
        Some(threads) => comparison.restricted_to(threads)?,
        None => comparison,
    };
    print!("{comparison}");

    let out_dir = args.out.unwrap_or_else(|| beside(&args.candidate));
    let written = draw_comparison_chart(&comparison, &out_dir).context("drawing the comparison charts")?;
    println!();
    println!("charts:");
    for path in written {
        println!("  {}", path.display());
    }
    Ok(())
}

/// The directory holding `file` ("." for a bare file name).
fn beside(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
