//! Records the commit the bench was built from (`git describe --always`), for the results files;
//! "unknown" outside a git checkout. Rebuilt when HEAD or a branch moves.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    let commit = git(&["describe", "--always", "--abbrev=12"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=STRATA_BENCH_COMMIT={commit}");
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for watched in ["HEAD", "refs/heads", "packed-refs"] {
            println!("cargo:rerun-if-changed={git_dir}/{watched}");
        }
    }
}
