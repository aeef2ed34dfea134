//! Command-line options of `strata bench`. Each workload's defaults are its post's parameters;
//! `--scale` multiplies its document counts.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use mongodb::options::{Acknowledgment, WriteConcern};
use serde::{Deserialize, Serialize};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Seed post 000: 2,400-byte documents without and with an index on `name`; the insert rate
    /// per sixth of the run, and find-by-name latency after each sixth.
    Bio(BioArgs),
    /// Seed post 001: small and large documents; time to build them vs time to persist them.
    Fudge(FudgeArgs),
    /// Seed post 002: {number, pet, name, email}, one per call and in batches, without and with
    /// an index on `number`; then equality and range queries on `number`.
    Pets(PetsArgs),
    /// Seed post 003: Tokutek's iibench (three compound indexes, 1,000 documents per insert,
    /// optional query thread) and the post's variant (four single-field indexes), w:1 and j:true.
    Iibench(IibenchArgs),
    /// Seed post 004: {field1, field2, date, n} with three indexes; two concurrent inserters from
    /// the two ends of the range, then a select client querying field1 and field2.
    Stores(StoresArgs),
    /// The front door: ping, insert_one and find_one one call at a time from one connection;
    /// calls/s and the server's CPU per call (from /proc), optionally beside a baseline binary
    /// started in the same run.
    Roundtrip(RoundtripArgs),
    /// Many clients: N connections each inserting one document per call, w:1 and j:true; the
    /// total rate, p50/p99 latency and commits per log sync at each N.
    Clients(ClientsArgs),
    /// Print two results files side by side, with B/A ratios.
    Compare(CompareArgs),
}

impl BenchCommand {
    pub fn workload_name(&self) -> &'static str {
        match self {
            BenchCommand::Bio(_) => "bio",
            BenchCommand::Fudge(_) => "fudge",
            BenchCommand::Pets(_) => "pets",
            BenchCommand::Iibench(_) => "iibench",
            BenchCommand::Stores(_) => "stores",
            BenchCommand::Roundtrip(_) => "roundtrip",
            BenchCommand::Clients(_) => "clients",
            BenchCommand::Compare(_) => "compare",
        }
    }

    pub fn common(&self) -> Option<&CommonArgs> {
        match self {
            BenchCommand::Bio(args) => Some(&args.common),
            BenchCommand::Fudge(args) => Some(&args.common),
            BenchCommand::Pets(args) => Some(&args.common),
            BenchCommand::Iibench(args) => Some(&args.common),
            BenchCommand::Stores(args) => Some(&args.common),
            BenchCommand::Roundtrip(args) => Some(&args.common),
            BenchCommand::Clients(args) => Some(&args.common),
            BenchCommand::Compare(_) => None,
        }
    }
}

/// Options every workload has.
#[derive(Args, Debug, Clone, Serialize)]
pub struct CommonArgs {
    /// Server to benchmark, e.g. mongodb://127.0.0.1:27017. Default: a Strata server started
    /// for this run (`strata serve` on a temporary directory and a free port).
    #[arg(long)]
    pub uri: Option<String>,
    /// Multiply the post's document counts by this (0.01 runs 1% of the post's size).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Directory for the results: <name>.json, .csv, .svg, .png.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Base name of the results files. Default: <workload>-<UTC date and time>.
    #[arg(long)]
    pub name: Option<String>,
    /// Run the Strata server this bench starts (and only it) in a memory cgroup of this size,
    /// its page cache included, e.g. 256MiB (with --replica-set: each member in a cgroup of its
    /// own of this size). Needs root and a writable cgroup memory controller.
    #[arg(long, value_parser = crate::size::checked_size)]
    pub memory_limit: Option<String>,
    /// Passed to `strata serve --max-connections`.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Passed to `strata serve --cache-size` (e.g. 128MiB).
    #[arg(long, value_parser = crate::size::checked_size)]
    pub cache_size: Option<String>,
    /// Database the workload writes into; dropped before each series.
    #[arg(long, default_value = "strata_bench")]
    pub db: String,
    /// Seed of the generated documents.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Documents per rate interval. Default: 100,000, or a tenth of a series when that is less.
    #[arg(long)]
    pub interval: Option<u64>,
    /// The strata binary to start. Default: this executable.
    #[arg(long)]
    pub strata: Option<PathBuf>,
    /// Start a replica set of this many members (on this machine, loopback ports) instead of
    /// one standalone server, and connect to it with `replicaSet`; member 0 is initiated first
    /// and is the primary measured. Writes may then use `majority`.
    #[arg(long)]
    pub replica_set: Option<usize>,
}

impl CommonArgs {
    /// `count` scaled, at least 1.
    pub fn scaled(&self, count: u64) -> u64 {
        ((count as f64 * self.scale).round() as u64).max(1)
    }
}

/// Which series to run: without secondary indexes, with them, or both.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexChoice {
    Without,
    With,
}

/// The write concern of the inserts. The Rust driver refuses unacknowledged writes (w:0), so the
/// posts that used fire-and-forget writes are run with w:1.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteMode {
    /// Acknowledged: {w: 1}.
    W1,
    /// Journaled: {w: 1, j: true}.
    J,
    /// On a majority of a replica set's voting members: {w: "majority"}.
    Majority,
}

impl WriteMode {
    pub fn concern(self) -> WriteConcern {
        let builder = WriteConcern::builder().w(Acknowledgment::Nodes(1));
        match self {
            WriteMode::W1 => builder.build(),
            WriteMode::J => builder.journal(true).build(),
            WriteMode::Majority => WriteConcern::builder().w(Acknowledgment::Majority).build(),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            WriteMode::W1 => "w:1",
            WriteMode::J => "j:true",
            WriteMode::Majority => "w:majority",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct BioArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Documents per series (the post: 60 million, in six batches of 10 million).
    #[arg(long, default_value_t = 60_000_000)]
    pub docs: u64,
    /// Documents per insert call (the post: one).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    /// Names are drawn from this many distinct values.
    #[arg(long, default_value_t = 1_000_000)]
    pub name_pool: u64,
    #[arg(long, value_delimiter = ',', default_value = "without,with")]
    pub indexes: Vec<IndexChoice>,
    #[arg(long, value_enum, default_value = "w1")]
    pub write_concern: WriteMode,
}

#[derive(Args, Debug, Clone)]
pub struct FudgeArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Small documents (3 primitives and a list of 5 integers); the post: 1,000,000.
    #[arg(long, default_value_t = 1_000_000)]
    pub small_docs: u64,
    /// Large documents (hundreds of fields in sub-documents, byte arrays); the post: 100,000.
    #[arg(long, default_value_t = 100_000)]
    pub large_docs: u64,
    /// How the documents are built: `document` (bson::Document, serialized by the driver, like
    /// the post's BasicDBObject) and/or `raw` (encoded straight into BSON bytes).
    #[arg(long, value_delimiter = ',', default_value = "document,raw")]
    pub forms: Vec<DocumentForm>,
    /// Documents per insert call (the post: one).
    #[arg(long, default_value_t = 1)]
    pub batch: u64,
    #[arg(long, value_enum, default_value = "w1")]
    pub write_concern: WriteMode,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DocumentForm {
    Document,
    Raw,
}

#[derive(Args, Debug, Clone)]
pub struct PetsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Documents per series: the post's 50 x 10,000 numbers x 5 pets.
    #[arg(long, default_value_t = 2_500_000)]
    pub docs: u64,
    /// `single`: one document per insert call (the post's save()); `batch`: --batch per call.
    #[arg(long, value_delimiter = ',', default_value = "single,batch")]
    pub modes: Vec<InsertMode>,
    #[arg(long, default_value_t = 1_000)]
    pub batch: u64,
    #[arg(long, value_delimiter = ',', default_value = "without,with")]
    pub indexes: Vec<IndexChoice>,
    /// Equality queries and range queries on `number` after each series (each kind).
    #[arg(long, default_value_t = 20)]
    pub queries: u64,
    #[arg(long, value_enum, default_value = "w1")]
    pub write_concern: WriteMode,
}

#[derive(Args, Debug)]
pub struct RoundtripArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Calls of each kind per round (--scale multiplies them).
    #[arg(long, default_value_t = 20_000)]
    pub calls: u64,
    /// Rounds; with --baseline, each round measures both servers, alternating which goes first.
    #[arg(long, default_value_t = 3)]
    pub rounds: u64,
    /// Another strata binary (e.g. an older build) to start beside the server under test and
    /// measure in the same run; ratios are server under test / baseline.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Then point reads (`find_one` by an indexed field) while another connection inserts
    /// batches of 1,000 documents at full speed: their p50/p99 and the server's CPU per read.
    #[arg(long)]
    pub beside_writer: bool,
}

#[derive(Args, Debug)]
pub struct ClientsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Connection counts to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,16,64,256")]
    pub connections: Vec<u64>,
    /// Seconds each level inserts for.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    #[arg(long, value_enum, value_delimiter = ',', default_value = "w1,j")]
    pub write_concerns: Vec<WriteMode>,
    /// Before the levels, open this many connections that each say hello once and then stay
    /// silent, and report the server's memory per idle connection and its threads (the server
    /// must run on this machine; its connection limit must allow them: `--max-connections`).
    #[arg(long, default_value_t = 0)]
    pub idle: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InsertMode {
    Single,
    Batch,
}

#[derive(Args, Debug, Clone)]
pub struct IibenchArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Documents per series (iibench's default run: 100 million).
    #[arg(long, default_value_t = 100_000_000)]
    pub docs: u64,
    /// Documents per insert call (iibench: 1,000).
    #[arg(long, default_value_t = 1_000)]
    pub batch: u64,
    /// `tokutek`: iibench's purchases with three compound indexes; `post`: {uri, name, origin,
    /// creation, expiration} with four single-field indexes.
    #[arg(long, value_delimiter = ',', default_value = "tokutek,post")]
    pub variants: Vec<IibenchVariant>,
    #[arg(long, value_delimiter = ',', default_value = "w1,j")]
    pub write_concerns: Vec<WriteMode>,
    #[arg(long, value_delimiter = ',', default_value = "without,with")]
    pub indexes: Vec<IndexChoice>,
    /// Run iibench's query thread beside the writer (queries back to back, cycling its three
    /// queries) once --query-begin documents are in.
    #[arg(long)]
    pub query_thread: bool,
    /// Documents returned per query (iibench: 10).
    #[arg(long, default_value_t = 10)]
    pub query_limit: i64,
    /// Start querying after this many documents (iibench: 1,000,000; scaled).
    #[arg(long, default_value_t = 1_000_000)]
    pub query_begin: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IibenchVariant {
    Tokutek,
    Post,
}

#[derive(Args, Debug, Clone)]
pub struct StoresArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Records (the post: 5,000,000), split between the two inserters.
    #[arg(long, default_value_t = 5_000_000)]
    pub records: u64,
    #[arg(long, value_delimiter = ',', default_value = "without,with")]
    pub indexes: Vec<IndexChoice>,
    /// Skip the select client (it runs after the indexed series only).
    #[arg(long)]
    pub no_select: bool,
    #[arg(long, value_enum, default_value = "w1")]
    pub write_concern: WriteMode,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// The baseline results file (JSON).
    pub a: PathBuf,
    /// The results file to compare with it (JSON).
    pub b: PathBuf,
}
