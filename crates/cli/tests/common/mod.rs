//! Test helpers: the real `strata` binary on a free loopback port with a temporary dbpath.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Strata {
    pub child: Child,
    pub address: String,
    pub dbpath: PathBuf,
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("strata-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).unwrap();
    path
}

impl Strata {
    pub fn start(dbpath: &Path) -> Strata {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["serve", "--dbpath"])
            .arg(dbpath)
            .args(["--port", "0", "--cache-size", "64MiB"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let address = line
            .trim()
            .strip_prefix("strata listening on ")
            .unwrap_or_else(|| panic!("first line {line:?}"))
            .to_owned();
        Strata { child, address, dbpath: dbpath.to_owned() }
    }

    pub fn uri(&self) -> String {
        format!("mongodb://{}/?directConnection=true&serverSelectionTimeoutMS=5000", self.address)
    }

    /// SIGTERM, and the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Strata {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
