//! `switchyard keys new`: makes an agent API key and prints it once, with the
//! `[[auth.api_keys]]` lines to paste into `switchyard.toml`.
//!
//! Rules: the key itself is printed only here and stored nowhere (the configuration keeps its SHA-256
//! digest); the printed lines are checked by the configuration loader itself before anything is printed, so
//! a principal or group the configuration would refuse is refused here with the same message.

use std::process::ExitCode;

use switchyard::auth::{api_key_digest, generate_api_key, hex};
use switchyard::config::Config;

/// Prints a fresh key for `principal` in `groups`.
pub fn new(principal: &str, groups: &[String]) -> anyhow::Result<ExitCode> {
    let key = generate_api_key()
        .map_err(|error| anyhow::anyhow!("cannot get random bytes from the operating system: {error}"))?;
    let lines = config_lines(principal, groups, &hex(&api_key_digest(&key)));
    Config::from_toml_str(&lines, "the generated lines", Vec::<(String, String)>::new())?;
    println!("API key for `{principal}` (shown only now; the gateway keeps only its digest):\n");
    println!("  {key}\n");
    println!("Agents send it as `Authorization: Bearer {key}`. Add these lines to switchyard.toml:\n");
    print!("{lines}");
    Ok(ExitCode::SUCCESS)
}

fn config_lines(principal: &str, groups: &[String], digest: &str) -> String {
    let quoted = |text: &str| toml::Value::String(text.to_owned()).to_string();
    let groups: Vec<String> = groups.iter().map(|group| quoted(group)).collect();
    format!(
        "[[auth.api_keys]]\nprincipal = {}\nsha256 = \"{digest}\"\ngroups = [{}]\n",
        quoted(principal),
        groups.join(", ")
    )
}
