//! Build script: records the git commit the binary is built from as `SWITCHYARD_COMMIT` (`switchyard --version`).
//!
//! Rules: only a checkout of this crate counts (`.git` beside `Cargo.toml`), so a source tarball unpacked inside
//! another repository does not claim that repository's commit; without git or a checkout the commit is "unknown"
//! and the build still succeeds. Cargo reruns this script when the checkout's HEAD, its reflog, the current
//! branch's ref or the packed refs change, and only for those files that exist (a missing file would make cargo
//! rerun it on every build).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = if manifest_dir.join(".git").exists() { head_commit(&manifest_dir) } else { None };
    println!("cargo::rustc-env=SWITCHYARD_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}

/// The short commit of HEAD, after telling cargo which files to watch for a change of it.
fn head_commit(dir: &Path) -> Option<String> {
    let mut watched = vec![git_path(dir, "HEAD"), git_path(dir, "logs/HEAD"), git_path(dir, "packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git_path(dir, &branch));
    }
    for file in watched.into_iter().flatten().filter(|file| file.exists()) {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    git(dir, &["rev-parse", "--short", "HEAD"])
}

/// Where git keeps `name` for this checkout (worktrees keep HEAD apart from the shared refs).
fn git_path(dir: &Path, name: &str) -> Option<PathBuf> {
    git(dir, &["rev-parse", "--path-format=absolute", "--git-path", name]).map(PathBuf::from)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_owned())
}
