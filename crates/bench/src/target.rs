//! The server under test: the user's `--uri`, or a Strata server this bench starts as a child
//! process (`<strata> serve --dbpath <tempdir>/db --port <free port>`), optionally inside a memory
//! cgroup. A started server's stdout and stderr go to `<tempdir>/server.log`, whose last lines
//! are shown when it fails. It is stopped with SIGTERM (a clean shutdown checkpoints), killed if
//! it has not exited two minutes later, and killed on drop if a run fails before that.

use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use bson::doc;
use mongodb::Client;

use crate::args::CommonArgs;
use crate::cgroup::Cgroup;
use crate::size::parse_size;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_TIMEOUT: Duration = Duration::from_secs(120);
/// The name of a replica set the bench starts.
const SET: &str = "bench";

pub struct Target {
    uri: String,
    spawned: Option<Spawned>,
    /// With `--replica-set N`: the other members.
    members: Vec<Spawned>,
}

struct Spawned {
    child: Child,
    /// Holds the data directory and the log; removed on drop.
    dir: tempfile::TempDir,
    // Dropped after `child` is reaped (fields drop in order, and `stop` waits for the child).
    cgroup: Option<Cgroup>,
}

/// How a started server ended.
pub struct StopReport {
    pub exit_status: String,
    pub clean: bool,
    pub peak_memory_bytes: Option<u64>,
}

impl Target {
    /// Connects to `--uri`, or starts a Strata server and waits until it answers `ping`.
    pub async fn start(common: &CommonArgs) -> anyhow::Result<Target> {
        if let Some(uri) = &common.uri {
            if common.memory_limit.is_some() || common.cache_size.is_some() {
                bail!("--memory-limit and --cache-size apply to the server the bench starts, not to --uri");
            }
            return Ok(Target { uri: uri.clone(), spawned: None, members: Vec::new() });
        }
        if let Some(size) = common.replica_set {
            return Target::start_set(common, size).await;
        }
        let spawned = Spawned::start(common, None)?;
        let port = spawned.port;
        let mut target = Target {
            uri: format!("mongodb://127.0.0.1:{port}/?directConnection=true"),
            spawned: Some(spawned.spawned),
            members: Vec::new(),
        };
        target.wait_ready().await?;
        Ok(target)
    }

    /// `--replica-set N`: N members on free loopback ports, initiated from member 0 (which
    /// campaigns first, and is the process measured); ready once the set has a primary. With
    /// `--memory-limit`, each member runs in a memory cgroup of its own of that size.
    async fn start_set(common: &CommonArgs, size: usize) -> anyhow::Result<Target> {
        if size == 0 {
            bail!("--replica-set needs at least one member");
        }
        let mut started = (0..size).map(|_| Spawned::start(common, Some(SET))).collect::<anyhow::Result<Vec<_>>>()?;
        let hosts: Vec<String> = started.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        let first = started.remove(0);
        let mut target = Target {
            uri: format!("mongodb://{}/?directConnection=true", hosts[0]),
            spawned: Some(first.spawned),
            members: started.into_iter().map(|s| s.spawned).collect(),
        };
        target.wait_ready().await?;
        for host in &hosts[1..] {
            let member = Client::with_uri_str(format!("mongodb://{host}/?directConnection=true")).await?;
            let deadline = Instant::now() + READY_TIMEOUT;
            while member.database("admin").run_command(doc! {"ping": 1}).await.is_err() {
                if Instant::now() > deadline {
                    bail!("member {host} did not answer ping within {READY_TIMEOUT:?}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let members: Vec<bson::Document> =
            hosts.iter().enumerate().map(|(id, host)| doc! {"_id": id as i32, "host": host}).collect();
        let client = Client::with_uri_str(&target.uri).await?;
        client
            .database("admin")
            .run_command(doc! {"replSetInitiate": {"_id": SET, "members": members}})
            .await
            .context("replSetInitiate")?;
        target.uri = format!("mongodb://{}/?replicaSet={SET}", hosts.join(","));
        target.wait_ready().await?;
        Ok(target)
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    pub fn started_by_bench(&self) -> bool {
        self.spawned.is_some()
    }

    /// When a started server has exited (crashed, or killed by the cgroup's OOM killer): how,
    /// and the end of its log.
    pub fn exit_explanation(&mut self) -> Option<String> {
        let spawned = self.spawned.as_mut()?;
        let status = spawned.child.try_wait().ok()??;
        let oom = if spawned.cgroup.is_some() && is_sigkill(status) {
            " — a SIGKILL under --memory-limit: most likely the memory cgroup's OOM killer"
        } else {
            ""
        };
        Some(format!("the Strata server exited ({status}){oom}; the end of its log:\n{}", spawned.log_tail()))
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        let client = Client::with_uri_str(format!("{}&serverSelectionTimeoutMS=1000", self.uri)).await?;
        // (Through a replica-set URI, `ping` waits for a primary.)
        loop {
            if let Some(explanation) = self.exit_explanation() {
                bail!("{explanation}");
            }
            if client.database("admin").run_command(doc! { "ping": 1 }).await.is_ok() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!("the Strata server did not answer ping within {READY_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, then wait for the exit (the other members' first); for `--uri`, nothing to do.
    pub async fn stop(mut self) -> anyhow::Result<Option<StopReport>> {
        for member in std::mem::take(&mut self.members) {
            Target { uri: String::new(), spawned: Some(member), members: Vec::new() }.stop_one().await?;
        }
        self.stop_one().await
    }

    async fn stop_one(mut self) -> anyhow::Result<Option<StopReport>> {
        let Some(spawned) = self.spawned.as_mut() else { return Ok(None) };
        let pid = rustix::process::Pid::from_raw(i32::try_from(spawned.child.id())?)
            .ok_or_else(|| anyhow!("the server has no valid pid"))?;
        // It may already be gone (an OOM kill): then the wait below reports how it ended.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let started = Instant::now();
        let status = loop {
            if let Some(status) = spawned.child.try_wait()? {
                break status;
            }
            if started.elapsed() > STOP_TIMEOUT {
                spawned.child.kill()?;
                bail!("the Strata server did not exit within {STOP_TIMEOUT:?} of SIGTERM; killed it");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let peak_memory_bytes = spawned.cgroup.as_ref().and_then(Cgroup::peak_bytes);
        Ok(Some(StopReport { exit_status: describe(status), clean: status.success(), peak_memory_bytes }))
    }

    /// The last lines of a started server's log (empty for `--uri`).
    pub fn log_tail(&self) -> String {
        self.spawned.as_ref().map(Spawned::log_tail).unwrap_or_default()
    }
}

struct Started {
    spawned: Spawned,
    port: u16,
}

impl Spawned {
    fn start(common: &CommonArgs, replica_set: Option<&str>) -> anyhow::Result<Started> {
        let strata = match &common.strata {
            Some(path) => path.clone(),
            None => std::env::current_exe().context("finding the strata executable")?,
        };
        let dir =
            tempfile::Builder::new().prefix("strata-bench-").tempdir().context("creating a temporary directory")?;
        let port = free_port()?;
        let mut args = vec![
            "serve".to_owned(),
            "--dbpath".to_owned(),
            dir.path().join("db").display().to_string(),
            "--port".to_owned(),
            port.to_string(),
        ];
        if let Some(set) = replica_set {
            args.extend(["--replSet".to_owned(), set.to_owned()]);
        }
        if let Some(max_connections) = common.max_connections {
            args.extend(["--max-connections".to_owned(), max_connections.to_string()]);
        }
        if let Some(cache_size) = &common.cache_size {
            args.extend(["--cache-size".to_owned(), cache_size.clone()]);
        }
        let cgroup = match &common.memory_limit {
            Some(limit) => Some(Cgroup::create(parse_size(limit)?)?),
            None => None,
        };
        let mut command = match &cgroup {
            Some(cgroup) => cgroup.command(&strata, &args),
            None => {
                let mut command = std::process::Command::new(&strata);
                command.args(&args);
                command
            }
        };
        let log = std::fs::File::create(dir.path().join("server.log")).context("creating the server log")?;
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned()));
        let child = command.spawn().with_context(|| format!("starting {}", strata.display()))?;
        Ok(Started { spawned: Spawned { child, dir, cgroup }, port })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A port nobody listens on now. Another process could take it before the server binds it; the
/// server then fails to start and says so.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

fn is_sigkill(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal() == Some(rustix::process::Signal::KILL.as_raw())
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}
