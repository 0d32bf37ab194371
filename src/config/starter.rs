//! The starter configuration `switchyard init` writes: a commented file that loads as it is, with one stdio
//! backend (the binary's own demo server), so `check` and `serve` work before the operator edits anything.
//!
//! Rules: the text lives in `starter.toml`; the one thing filled in is the demo server's command, written as a
//! TOML string with any `${` escaped, so no path can break the file or be read as a variable reference.

/// The starter file whose demo backend runs `command demo-server --stdio`.
pub fn starter_file(command: &str) -> String {
    let quoted = toml::Value::String(command.replace("${", "$${")).to_string();
    include_str!("starter.toml").replace("\"@COMMAND@\"", &quoted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Endpoint, Transport};

    #[test]
    fn the_starter_file_loads_with_its_demo_backend() {
        let command = std::env::current_exe().unwrap().display().to_string();
        let text = starter_file(&command);
        let config = Config::from_toml_str(&text, "switchyard.toml", [("PATH", "/usr/bin")]).unwrap();
        let [demo] = config.backends.as_slice() else { panic!("one backend: {config:?}") };
        assert_eq!((demo.name.as_str(), demo.transport), ("demo", Transport::Stdio));
        let Endpoint::Process(process) = &demo.endpoint else { panic!("a process") };
        assert_eq!(process.command.display().to_string(), command);
        assert_eq!(process.args, ["demo-server", "--stdio"]);
        assert_eq!(config.server.data_dir.display().to_string(), "switchyard-data");
    }

    #[test]
    fn odd_commands_stay_one_string() {
        let text = starter_file("/opt/a \"b\"/${HOME}/switchyard");
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["backends"][0]["command"].as_str(), Some("/opt/a \"b\"/$${HOME}/switchyard"));
    }
}
