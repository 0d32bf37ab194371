//! The demo server over stdio (`switchyard demo-server --stdio`; MCP 2025-11-25 `basic/transports.mdx` §stdio):
//! the same methods and tools as over HTTP, one JSON-RPC message per line on stdin and stdout.
//!
//! Rules:
//! - The process is the session: `initialize` starts it (the `counter` tool counts per process), and every other
//!   request before that is refused with `-32600`.
//! - Requests run concurrently (a `sleep` does not hold up an `echo`); one writer task writes whole lines, so
//!   answers never interleave. Notifications and responses from the client need no answer.
//! - Unparsable lines get `-32700`, batches `-32600`, as over HTTP. Nothing but JSON-RPC is written to stdout (logs
//!   go to stderr). The server ends when stdin ends, after the answers still running are written.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::methods;
use super::sessions::{SessionId, Sessions};
use super::tools::Caller;
use crate::mcp::jsonrpc::{self, Kind};
use crate::mcp::method;

/// Serves one client on `input` and `output` until `input` ends.
pub async fn serve(
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (answers, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_lines(output, queue));
    let server = Arc::new(Server { sessions: Sessions::with_capacity(1), session: OnceLock::new() });
    let mut lines = BufReader::new(input).lines();
    while let Some(line) = lines.next_line().await? {
        if !line.trim().is_empty() {
            server.receive(&line, &answers);
        }
    }
    drop(answers);
    writer.await.map_err(std::io::Error::other)?
}

struct Server {
    sessions: Sessions,
    session: OnceLock<SessionId>,
}

impl Server {
    fn receive(self: &Arc<Self>, line: &str, answers: &mpsc::UnboundedSender<Value>) {
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(error) => {
                let _ = answers.send(jsonrpc::error(None, jsonrpc::PARSE_ERROR, &format!("Parse error: {error}")));
                return;
            }
        };
        let refusal = match jsonrpc::kind(&message) {
            Kind::Request { id, method: method::INITIALIZE } => self.initialize(id, message.get("params")),
            Kind::Request { id, method } => match self.session.get() {
                Some(&session) => {
                    self.run(id.clone(), method.to_owned(), message.get("params").cloned(), session, answers);
                    return;
                }
                None => jsonrpc::error(Some(id), jsonrpc::INVALID_REQUEST, "send initialize first"),
            },
            Kind::Notification { .. } | Kind::Response { .. } => return,
            Kind::Invalid if message.is_array() => {
                jsonrpc::error(None, jsonrpc::INVALID_REQUEST, "JSON-RPC batches are not supported")
            }
            Kind::Invalid => {
                let id = message.get("id").filter(|id| jsonrpc::is_valid_id(id));
                jsonrpc::error(id, jsonrpc::INVALID_REQUEST, "not a JSON-RPC request, notification or response")
            }
        };
        let _ = answers.send(refusal);
    }

    fn initialize(&self, id: &Value, params: Option<&Value>) -> Value {
        match methods::initialize(params) {
            Ok(result) => {
                self.session.get_or_init(|| self.sessions.create());
                jsonrpc::result(id, result)
            }
            Err(error) => jsonrpc::error(Some(id), error.code(), &error.to_string()),
        }
    }

    fn run(
        self: &Arc<Self>,
        id: Value,
        method: String,
        params: Option<Value>,
        session: SessionId,
        answers: &mpsc::UnboundedSender<Value>,
    ) {
        let (server, answers) = (Arc::clone(self), answers.clone());
        tokio::spawn(async move {
            let caller = Caller { sessions: &server.sessions, session };
            let answer = match methods::handle(&method, params.as_ref(), caller).await {
                Ok(result) => jsonrpc::result(&id, result),
                Err(error) => jsonrpc::error(Some(&id), error.code(), &error.to_string()),
            };
            let _ = answers.send(answer);
        });
    }
}

async fn write_lines(
    mut output: impl AsyncWrite + Unpin,
    mut queue: mpsc::UnboundedReceiver<Value>,
) -> std::io::Result<()> {
    while let Some(message) = queue.recv().await {
        let mut line = serde_json::to_vec(&message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        output.write_all(&line).await?;
        output.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Feeds `input` to a server and returns every line it wrote, parsed.
    async fn exchange(input: &str) -> Vec<Value> {
        let (mut client, server_end) = tokio::io::duplex(64 * 1024);
        let (server_in, server_out) = tokio::io::split(server_end);
        let server = tokio::spawn(serve(server_in, server_out));
        client.write_all(input.as_bytes()).await.expect("write");
        client.shutdown().await.expect("close");
        let mut lines = BufReader::new(client).lines();
        let mut answers = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            answers.push(serde_json::from_str(&line).expect("every line is JSON"));
        }
        server.await.expect("joined").expect("served");
        answers
    }

    #[tokio::test]
    async fn requests_before_initialize_bad_json_and_batches_are_refused() {
        let answers = exchange("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\nnot json\n[]\n\n").await;
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(answers[0]["id"], 1);
        assert_eq!(answers[0]["error"]["code"], jsonrpc::INVALID_REQUEST);
        assert_eq!(answers[1]["error"]["code"], jsonrpc::PARSE_ERROR);
        assert_eq!(answers[2]["error"]["message"], "JSON-RPC batches are not supported");
    }

    #[tokio::test]
    async fn after_initialize_the_tools_answer_and_notifications_get_nothing() {
        let input = "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}\n\
                     {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
                     {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"hi\"}}}\n";
        let answers = exchange(input).await;
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(answers[1]["result"]["content"][0]["text"], "hi");
    }
}
