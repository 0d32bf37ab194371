//! Tests of `backend::mcp_client::fault`: each cause in words, for an operator and for an agent.

use super::*;

/// `fault` as `audience` reads it.
fn said(fault: &Fault, audience: Audience) -> String {
    struct Shown<'a>(&'a Fault, Audience);
    impl fmt::Display for Shown<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.render(self.1, f)
        }
    }
    Shown(fault, audience).to_string()
}

#[test]
fn each_cause_says_what_to_check() {
    let refused = Fault::ConnectionRefused { address: "127.0.0.1:9".into() };
    assert_eq!(
        said(&refused, Audience::Operator),
        "connection refused at 127.0.0.1:9; check that the server is running and listening there"
    );
    let missing = Fault::status(404, "  no such route\nmore  ");
    assert_eq!(said(&missing, Audience::Operator), "HTTP 404 Not Found (\"no such route\"); check the path in `url`");
    let refused_token = Fault::status(401, "");
    assert_eq!(said(&refused_token, Audience::Operator), "HTTP 401 Unauthorized; check `credential` or `oauth`");
    assert_eq!(said(&Fault::status(413, ""), Audience::Operator), "HTTP 413 Content Too Large");
}

#[test]
fn an_agent_reads_no_address_command_body_or_stderr() {
    let cases = [
        Fault::ConnectionRefused { address: "10.1.2.3:8080".into() },
        Fault::Unreachable { address: "10.1.2.3:8080".into(), detail: "dns error 10.1.2.3".into() },
        Fault::status(404, "secret 10.1.2.3 body"),
        Fault::NotStarted { program: "/opt/10.1.2.3/server".into(), error: "No such file".into() },
        Fault::ProcessEnded(ProcessEnd {
            exit: Exit::Status(1),
            stderr: vec!["at 10.1.2.3".into()],
            manager: Some(ManagerError { tool: "npm", missing: Some("'@10.1.2.3/pkg'".into()), line: "x".into() }),
        }),
    ];
    for fault in cases {
        let operator = said(&fault, Audience::Operator);
        let agent = said(&fault, Audience::Agent);
        assert!(operator.contains("10.1.2.3"), "{operator}");
        assert!(!agent.contains("10.1.2.3"), "{agent}");
    }
}

#[test]
fn a_process_end_is_its_status_or_signal_never_the_gateways_stop() {
    let exited = ProcessEnd { exit: Exit::Status(3), stderr: vec!["boom".into(), "bye".into()], manager: None };
    let exited = said(&Fault::ProcessEnded(exited), Audience::Operator);
    assert_eq!(
        exited,
        "the process exited with status 3; its last stderr lines: \"boom | bye\"; check `command`, `args` and `env`"
    );
    let killed = ProcessEnd { exit: Exit::Signal(libc::SIGKILL), stderr: Vec::new(), manager: None };
    let killed = said(&Fault::ProcessEnded(killed), Audience::Operator);
    assert!(killed.starts_with("the process was killed by signal 9 (SIGKILL); it crashed or was killed outside"));
    assert!(killed.contains("it wrote nothing to stderr") && !killed.contains("gateway stopped"), "{killed}");
    let npm = ManagerError { tool: "npm", missing: Some("'@scope/pkg@*'".into()), line: String::new() };
    let npm = ProcessEnd { exit: Exit::Status(1), stderr: vec!["npm error …".into()], manager: Some(npm) };
    assert_eq!(
        said(&Fault::ProcessEnded(npm), Audience::Operator),
        "the process exited with status 1: npm could not find the package '@scope/pkg@*' in its registry; check the package name in `args`"
    );
}

#[test]
fn backing_off_names_the_last_cause_once() {
    let last = Fault::NotStarted { program: "/bin/nope".into(), error: "No such file or directory".into() };
    let waiting = Fault::BackingOff { failures: 2, retry_in: Duration::from_millis(400), last: Box::new(last) };
    let text = said(&waiting, Audience::Operator);
    assert_eq!(
        text,
        "could not start `/bin/nope`: No such file or directory; check the `command` (failed starts in a row: 2; the next in 400 ms)"
    );
}
