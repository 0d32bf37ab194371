//! How a stdio backend's process ended, in the terms of its failure's sentence ([`ProcessEnd`]): its exit status
//! or signal, its last stderr lines, and what a package manager among them said.
//!
//! Rules: `npx` and `uvx` start most stdio servers, and when the package is wrong the process's only words are
//! the package manager's. npm writes `npm error …` (`npm ERR! …` before npm 7), and a missing package is
//! `npm error 404  '<package>@<range>' is not in this registry.`; uv writes `Because <package> was not found in the
//! package registry …`. A line naming the missing package outranks any other error line of its tool, and among
//! lines of one rank the first is kept.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crate::backend::mcp_client::{Exit, ManagerError, ProcessEnd};

/// A package manager's error line, with how much it says (a missing package outranks any other error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Recognised {
    pub(super) rank: u8,
    pub(super) error: ManagerError,
}

const MISSING: u8 = 3;
const NOT_FOUND: u8 = 2;
const SAID: u8 = 1;

/// How the process ended: `status` as its wait returned it (`None`: it could not be read).
pub(super) fn process_end(
    status: Option<ExitStatus>,
    stderr: Vec<String>,
    manager: Option<ManagerError>,
) -> ProcessEnd {
    let exit = match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Status(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Unknown,
        },
        None => Exit::Unknown,
    };
    ProcessEnd { exit, stderr, manager }
}

/// The package manager's error that `line` (one stderr line) is, if it is one (see the module rules).
pub(super) fn recognise(line: &str) -> Option<Recognised> {
    let line = line.trim();
    let recognised = |rank, tool, missing: Option<&str>| Recognised {
        rank,
        error: ManagerError { tool, missing: missing.map(str::to_owned), line: line.to_owned() },
    };
    if let Some(said) = line.strip_prefix("npm error").or_else(|| line.strip_prefix("npm ERR!")) {
        let said = said.trim();
        if let Some((before, _)) = said.split_once(" is not in this registry") {
            return Some(recognised(MISSING, "npm", before.split_whitespace().last()));
        }
        let idle = said.is_empty() || said == "404" || said.starts_with("code ") || said.starts_with("A complete log");
        let rank = if said.starts_with("404") { NOT_FOUND } else { SAID };
        return (!idle).then(|| recognised(rank, "npm", None));
    }
    if let Some((before, _)) = line.split_once(" was not found in the package registry") {
        return Some(recognised(MISSING, "uv", before.split_whitespace().last()));
    }
    line.contains("No solution found when resolving").then(|| recognised(SAID, "uv", None))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What npm 10 writes when `npx -y @scope/pkg` names a package its registry does not have.
    const NPM_404: [&str; 8] = [
        "npm error code E404",
        "npm error 404 Not Found - GET https://registry.npmjs.org/@scope%2fpkg - Not found",
        "npm error 404",
        "npm error 404  '@scope/pkg@*' is not in this registry.",
        "npm error 404",
        "npm error 404 Note that you can also install from a",
        "npm error 404 tarball, folder, http url, or git url.",
        "npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log",
    ];

    fn best(lines: &[&str]) -> Option<ManagerError> {
        let mut best: Option<Recognised> = None;
        for seen in lines.iter().filter_map(|line| recognise(line)) {
            if best.as_ref().is_none_or(|known| seen.rank > known.rank) {
                best = Some(seen);
            }
        }
        best.map(|seen| seen.error)
    }

    #[test]
    fn a_missing_npm_package_is_named() {
        let error = best(&NPM_404).expect("recognised");
        assert_eq!((error.tool, error.missing.as_deref()), ("npm", Some("'@scope/pkg@*'")));
        let old = best(&["npm ERR! 404  'left-pad-nope@latest' is not in this registry."]).expect("npm 6");
        assert_eq!(old.missing.as_deref(), Some("'left-pad-nope@latest'"));
        let other = best(&["npm error code EACCES", "npm error syscall mkdir", "npm error A complete log"]);
        assert_eq!(other.map(|error| error.line).as_deref(), Some("npm error syscall mkdir"));
    }

    #[test]
    fn a_missing_uv_package_is_named() {
        let lines = [
            "  × No solution found when resolving tool dependencies:",
            "  ╰─▶ Because nonexistent-pkg-xyz was not found in the package registry and you require nonexistent-pkg-xyz, we can conclude that your requirements are unsatisfiable.",
        ];
        let error = best(&lines).expect("recognised");
        assert_eq!((error.tool, error.missing.as_deref()), ("uv", Some("nonexistent-pkg-xyz")));
        assert_eq!(best(&["error: something else", "Traceback (most recent call last):"]), None);
    }

    #[test]
    fn the_exit_is_a_status_or_a_signal() {
        let exited = process_end(Some(ExitStatus::from_raw(3 << 8)), Vec::new(), None);
        assert_eq!(exited.exit, Exit::Status(3));
        let killed = process_end(Some(ExitStatus::from_raw(libc::SIGKILL)), Vec::new(), None);
        assert_eq!(killed.exit, Exit::Signal(libc::SIGKILL));
        assert_eq!(process_end(None, Vec::new(), None).exit, Exit::Unknown);
    }
}
