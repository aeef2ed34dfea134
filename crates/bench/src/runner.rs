//! One workload run from start to files: start (or reach) the server, record the machine and
//! the server's buildInfo, run the workload, stop the server, write JSON, CSV, SVG and PNG.
//! The files are written even when the workload fails, with the failure in `errors`; the run
//! then still ends in that error.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use bson::doc;
use mongodb::Client;

use crate::args::BenchCommand;
use crate::context::Context;
use crate::machine::Machine;
use crate::progress::Progress;
use crate::results::{FORMAT, RunResults, ServerInfo};
use crate::target::Target;
use crate::workloads;

pub async fn execute(command: BenchCommand) -> anyhow::Result<()> {
    let Some(common) = command.common().cloned() else { bail!("not a workload") };
    if !(common.scale > 0.0 && common.scale.is_finite()) {
        bail!("--scale must be a positive number");
    }
    let workload = command.workload_name();
    let started_at = chrono::Utc::now();
    let name = common.name.clone().unwrap_or_else(|| format!("{workload}-{}", started_at.format("%Y%m%d-%H%M%S")));
    std::fs::create_dir_all(&common.out).with_context(|| format!("creating {}", common.out.display()))?;

    let mut target = Target::start(&common).await?;
    let client = Client::with_uri_str(target.uri()).await.context("connecting to the server")?;
    let build_info = client.database("admin").run_command(doc! { "buildInfo": 1 }).await.context("buildInfo")?;
    let results = RunResults {
        format: FORMAT,
        workload: workload.to_owned(),
        started_at: started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        bench_commit: env!("STRATA_BENCH_COMMIT").to_owned(),
        command_line: std::env::args().collect(),
        machine: Machine::detect(),
        server: ServerInfo {
            started_by_bench: target.started_by_bench(),
            build_info: serde_json::to_value(&build_info).unwrap_or_default(),
            memory_limit: common.memory_limit.clone(),
            cache_size: common.cache_size.clone(),
            ..ServerInfo::default()
        },
        parameters: BTreeMap::new(),
        series: Vec::new(),
        measurements: Vec::new(),
        errors: Vec::new(),
    };
    let mut context = Context { client, uri: target.uri().to_owned(), common, progress: Progress::new(), results };
    context.progress.println(&format!(
        "strata bench {workload}: server {} at {}; results in {}",
        context.results.server.version(),
        target.uri(),
        context.common.out.join(&name).display()
    ));
    context.parameter("scale", context.common.scale);
    context.parameter("seed", context.common.seed);

    let outcome = workloads::run(&mut context, &command).await;
    context.progress.finish();
    let outcome = outcome.map_err(|error| match target.exit_explanation() {
        Some(explanation) => error.context(explanation),
        None => error,
    });
    if let Err(error) = &outcome {
        context.results.errors.push(format!("the run failed: {error:#}"));
    }
    let Context { client, mut results, common, .. } = context;
    drop(client);
    let server_outcome = record_stop(&mut results, target).await;
    write_files(&results, &common.out, &name)?;
    outcome?;
    server_outcome
}

/// Stops a started server and records how it ended; an unclean exit fails the run.
async fn record_stop(results: &mut RunResults, target: Target) -> anyhow::Result<()> {
    let log_tail = target.log_tail();
    let Some(report) = target.stop().await? else { return Ok(()) };
    results.server.exit_status = Some(report.exit_status.clone());
    results.server.peak_memory_bytes = report.peak_memory_bytes;
    if let Some(peak) = report.peak_memory_bytes {
        println!("server peak memory (cgroup, page cache included): {} MiB", peak >> 20);
    }
    if !report.clean {
        let message = format!("the Strata server did not shut down cleanly: {}", report.exit_status);
        results.errors.push(message.clone());
        bail!("{message}; the end of its log:\n{log_tail}");
    }
    Ok(())
}

fn write_files(results: &RunResults, out: &std::path::Path, name: &str) -> anyhow::Result<()> {
    let path = |extension: &str| out.join(format!("{name}.{extension}"));
    results.write_json(&path("json"))?;
    results.write_csv(&path("csv"))?;
    crate::plot::draw(results, &path("svg"), &path("png"))?;
    println!("results: {} (.csv, .svg, .png)", path("json").display());
    for error in &results.errors {
        println!("error: {error}");
    }
    Ok(())
}
