//! `strata repair --dbpath DIR --out NEW`: salvages every document that can still be read from a
//! damaged data directory into a new one, rebuilds every index from them, and reports what was
//! lost (the work is `docstore::repair`'s; this is its command line and its report).

use std::path::PathBuf;

use anyhow::Context as _;
use docstore::repair::{CollectionReport, repair};

#[derive(clap::Args, Debug, Clone)]
pub struct RepairArgs {
    /// The damaged data directory (read, never written; no server may be running on it).
    #[arg(long)]
    pub dbpath: PathBuf,
    /// The new data directory to write (created; must not hold a data file).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: RepairArgs) -> anyhow::Result<()> {
    let report = repair(&args.dbpath, &args.out, &mut print_collection)
        .with_context(|| format!("repairing {} into {}", args.dbpath.display(), args.out.display()))?;
    if let Some(damage) = &report.catalog_damage {
        println!("checkpoint catalog: damaged, read from its copy: {damage}");
    }
    if let Some(damage) = &report.log_damage {
        println!("log: replay stopped at damage; commits logged after it are lost: {damage}");
    }
    print_summary(&args, &report.collections);
    Ok(())
}

fn print_collection(report: &CollectionReport) {
    let counted = report.counted.map_or("unknown".to_string(), |n| n.to_string());
    println!("{}: {} documents salvaged (the collection counted {counted})", report.namespace, report.salvaged);
    for damage in &report.damage {
        println!("  lost: {damage}");
    }
    for error in &report.index_errors {
        println!("  index: {error}");
    }
}

fn print_summary(args: &RepairArgs, reports: &[CollectionReport]) {
    let salvaged: u64 = reports.iter().map(|r| r.salvaged).sum();
    let damaged = reports.iter().filter(|r| !r.damage.is_empty() || !r.index_errors.is_empty()).count();
    let short: u64 = reports.iter().map(|r| r.counted.unwrap_or(r.salvaged).saturating_sub(r.salvaged)).sum();
    println!(
        "repaired {} into {}: {} collections, {salvaged} documents salvaged, {damaged} collections with damage, {short} documents fewer than counted",
        args.dbpath.display(),
        args.out.display(),
        reports.len()
    );
}
