//! The fault backend's 2026-07-28 era (MCP 2026-07-28 §2–§4, §8), written from the specification:
//! a request whose `params._meta` names a protocol version is served without a session, after the checks a modern
//! server makes, in the spec's order — the mirrored headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`,
//! and the `Mcp-Param-*` of the tool's `x-mcp-header` arguments; `400` + `-32020`), the version (`400` +
//! `-32022` naming the versions served), the required `_meta` members (`400` + `-32602`) — then `server/discover`,
//! `subscriptions/listen` (acknowledgement, one `notifications/resources/updated` per subscribed URI, optionally a
//! tool list change, then silence until the client closes) or the methods both eras share; the methods 2026-07-28
//! removed get `404` + `-32601`. A modern-only backend answers `GET` and `DELETE` with `405` and every request of
//! the 2025 era (`initialize` included) with `400` + `-32022` naming its versions.

use std::io;

use tokio::io::AsyncWriteExt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::{Exchange, client_gone, event, failure, success};

pub const LATEST_MODERN: &str = "2026-07-28";
const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The fault backend's own `requestState`: this prefix and the next round's number.
pub const STATE_PREFIX: &str = "fault-round-";
const REMOVED: [&str; 6] =
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/get"];

/// Which protocol eras the backend serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Eras {
    /// 2025-11-25 and earlier only (sessions, `initialize`).
    #[default]
    Legacy,
    /// Both, on one endpoint.
    Both,
    /// 2026-07-28 only.
    Modern,
}

impl Exchange<'_> {
    /// Serves the request when it belongs to the modern era (or this backend serves no other); `None` leaves it
    /// to the 2025-era code.
    pub(super) async fn modern_route(&mut self) -> Option<io::Result<()>> {
        let eras = self.script.eras;
        if eras == Eras::Legacy {
            return None;
        }
        let body = self.request.body.clone();
        let version = body.as_ref().and_then(|body| body.pointer("/params/_meta")?.get(META_VERSION)?.as_str());
        match (self.request.http_method.as_str(), version) {
            ("POST", Some(version)) => {
                let version = version.to_owned();
                Some(self.modern(body.unwrap_or_default(), &version).await)
            }
            (_, _) if eras == Eras::Both => None,
            ("GET" | "DELETE", _) => Some(self.text(405, "a 2026-07-28 server has no GET or DELETE").await),
            _ => {
                let id = body.as_ref().and_then(|body| body.get("id")).cloned().unwrap_or(Value::Null);
                let requested = body.as_ref().and_then(|body| body.pointer("/params/protocolVersion")).cloned();
                Some(self.unsupported(id, requested.unwrap_or(Value::Null)).await)
            }
        }
    }

    async fn modern(&mut self, message: Value, version: &str) -> io::Result<()> {
        let id = message.get("id").cloned();
        let error_id = id.clone().unwrap_or(Value::Null);
        if let Some(why) = self.header_mismatch(&message, version) {
            return self.send_json(400, Vec::new(), &failure(error_id, -32020, &why)).await;
        }
        if !self.script.modern_versions.iter().any(|served| served == version) {
            return self.unsupported(error_id, json!(version)).await;
        }
        if message.pointer("/params/_meta").and_then(|meta| meta.get(META_CAPABILITIES)).is_none() {
            let missing = failure(error_id, -32602, "params._meta lacks io.modelcontextprotocol/clientCapabilities");
            return self.send_json(400, Vec::new(), &missing).await;
        }
        self.modern = true;
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        let Some(id) = id else { return self.text(202, "").await };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match method.as_str() {
            "server/discover" => {
                let result = json!({
                    "resultType": "complete",
                    "supportedVersions": self.supported(),
                    "capabilities": self.script.capabilities,
                    "ttlMs": 0,
                    "cacheScope": "public",
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fault-backend", "version": "0.0.0"}}
                });
                self.reply(Vec::new(), success(id, result)).await
            }
            "subscriptions/listen" => self.listen(&id, &params).await,
            "tools/call" | "prompts/get" | "resources/read" if !self.script.input_rounds.is_empty() => {
                self.ask_for_input(&method, id, &params).await
            }
            removed if REMOVED.contains(&removed) => {
                self.send_json(404, Vec::new(), &failure(id, -32601, "method not found")).await
            }
            _ => self.rpc(&method, id, &params).await,
        }
    }

    /// A request of `Script::input_rounds`: the next unanswered round, else the request itself.
    async fn ask_for_input(&mut self, method: &str, id: Value, params: &Value) -> io::Result<()> {
        let rounds = &self.script.input_rounds;
        let state = params.get("requestState").and_then(Value::as_str);
        let reached = state.and_then(|state| state.strip_prefix(STATE_PREFIX)?.parse::<usize>().ok()).unwrap_or(0);
        let answered = |round: &Value| {
            let keys = round.as_object().into_iter().flat_map(|asked| asked.keys());
            keys.into_iter().all(|key| params.pointer(&format!("/inputResponses/{key}")).is_some())
        };
        let round = match reached.checked_sub(1).and_then(|previous| rounds.get(previous)) {
            Some(previous) if !answered(previous) => reached - 1,
            _ => reached,
        };
        let Some(asked) = rounds.get(round).cloned() else {
            return self.rpc(method, id, params).await;
        };
        super::pause(self.script.input_delay).await;
        let result = json!({
            "resultType": "input_required",
            "inputRequests": asked,
            "requestState": format!("{STATE_PREFIX}{}", round + 1),
        });
        self.reply(Vec::new(), success(id, result)).await
    }

    /// `400` + `-32022` naming the versions served.
    async fn unsupported(&mut self, id: Value, requested: Value) -> io::Result<()> {
        let mut refusal = failure(id, -32022, "unsupported protocol version");
        refusal["error"]["data"] = json!({ "supported": self.supported(), "requested": requested });
        self.send_json(400, Vec::new(), &refusal).await
    }

    fn supported(&self) -> Vec<String> {
        let legacy = if self.script.eras == Eras::Both { &LEGACY_VERSIONS[..] } else { &[] };
        self.script.modern_versions.iter().cloned().chain(legacy.iter().map(|v| (*v).to_owned())).collect()
    }

    /// Why the mirrored headers do not match the body, if they do not.
    fn header_mismatch(&self, message: &Value, version: &str) -> Option<String> {
        let header = |name: &str| self.request.header(name).map(decode);
        if header("mcp-protocol-version").as_deref() != Some(version) {
            return Some("MCP-Protocol-Version does not match params._meta".into());
        }
        let method = message.get("method").and_then(Value::as_str);
        if header("mcp-method").as_deref() != method {
            return Some("Mcp-Method does not match the method".into());
        }
        let named = match method {
            Some("tools/call" | "prompts/get") => message.pointer("/params/name"),
            Some("resources/read") => message.pointer("/params/uri"),
            _ => None,
        };
        if let Some(named) = named
            && header("mcp-name").as_deref() != named.as_str()
        {
            return Some("Mcp-Name does not match the name".into());
        }
        if method == Some("tools/call") {
            return self.param_mismatch(message);
        }
        None
    }

    /// Top-level `x-mcp-header` arguments of the called tool must come with their header, equal once decoded.
    fn param_mismatch(&self, message: &Value) -> Option<String> {
        let name = message.pointer("/params/name")?.as_str()?;
        let tool = self.script.tools.iter().find(|tool| tool["name"] == name)?;
        let properties = tool.pointer("/inputSchema/properties")?.as_object()?;
        for (property, schema) in properties {
            let Some(header) = schema.get("x-mcp-header").and_then(Value::as_str) else { continue };
            let value = message.pointer(&format!("/params/arguments/{property}")).filter(|v| !v.is_null());
            let expected = value.map(|value| value.as_str().map_or_else(|| value.to_string(), str::to_owned));
            let sent = self.request.header(&format!("mcp-param-{header}")).map(decode);
            if expected != sent {
                return Some(format!("Mcp-Param-{header} is {sent:?}, the argument {expected:?}"));
            }
        }
        None
    }

    /// A listen stream: the acknowledgement, an update per subscribed URI, a tool list change when scripted, then
    /// silence until the client closes.
    async fn listen(&mut self, id: &Value, params: &Value) -> io::Result<()> {
        let asked = params.get("notifications").cloned().unwrap_or_else(|| json!({}));
        let tagged = |method: &str, params: Value| {
            let mut message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
            message["params"]["_meta"] = json!({ "io.modelcontextprotocol/subscriptionId": id });
            message
        };
        let mut messages = vec![tagged("notifications/subscriptions/acknowledged", json!({ "notifications": asked }))];
        for uri in asked.get("resourceSubscriptions").and_then(Value::as_array).into_iter().flatten() {
            messages.push(tagged("notifications/resources/updated", json!({ "uri": uri })));
        }
        if self.script.announce_tools_changed && asked.get("toolsListChanged") == Some(&json!(true)) {
            messages.push(tagged("notifications/tools/list_changed", json!({})));
        }
        self.write_sse_head(Vec::new()).await?;
        for message in messages {
            self.stream.write_all(&event(None, None, &message.to_string())).await?;
        }
        let _ = client_gone(self.stream).await;
        Ok(())
    }
}

/// A header value as sent: plain, or the base64 sentinel.
fn decode(value: &str) -> String {
    let inner = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?="));
    match inner.and_then(|inner| STANDARD.decode(inner).ok()) {
        Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        None => value.to_owned(),
    }
}
