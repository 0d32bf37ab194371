//! Tool-name rules (MCP 2025-11-25 tools §"Tool names", SEP-986, narrowed by LLM provider APIs): 1–64
//! characters of `[A-Za-z0-9_-]`. MCP itself also allows `.`, but provider APIs reject it, so the gateway
//! withholds such names rather than expose tools an agent cannot call.

pub const MAX_TOOL_NAME: usize = 64;

pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}
