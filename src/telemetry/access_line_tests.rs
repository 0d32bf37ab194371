//! Unit tests of the access line writer: both shapes, escaping, the timestamp, order and dropping when full.

use super::*;

/// A writer that keeps what was written.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().clone()).unwrap()
    }
}

fn fields(principal: &str, micros: u64) -> AccessFields<'_> {
    AccessFields {
        principal,
        session: "0123abcd",
        method: "tools/call",
        tool: "demo__echo",
        backend: "demo",
        outcome: "completed",
        error_type: "",
        status: 200,
        micros,
    }
}

/// 2026-12-01T11:53:48.012345Z
fn moment() -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(1_796_126_028_012_345)
}

#[test]
fn json_lines_are_objects_with_every_field_and_escaped_names() {
    let captured = Captured::default();
    let writer = AccessWriter::new(LogFormat::Json, false, Box::new(captured.clone()));
    writer.queue(&fields("al\"ice\n\u{1}\\", 1_234_567), moment());
    writer.queue(&fields("bob", 7), moment());
    assert_eq!(captured.text(), "", "nothing written before the writer runs");
    writer.flush();
    let text = captured.text();
    let lines: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    let first = &lines[0];
    assert_eq!(first["timestamp"], "2026-12-01T11:53:48.012345Z");
    assert_eq!(first["level"], "INFO");
    assert_eq!(first["message"], "request");
    assert_eq!(first["target"], "switchyard::access");
    assert_eq!(first["principal"], "al\"ice\n\u{1}\\", "escaped, and read back whole");
    assert_eq!(first["session"], "0123abcd");
    assert_eq!(first["error_type"], "");
    assert_eq!(first["status"], 200);
    assert_eq!(first["duration_ms"].as_f64(), Some(1234.567));
    assert_eq!(lines[1]["duration_ms"].as_f64(), Some(0.007));
    assert_eq!(lines[1]["principal"], "bob", "in the order queued");
}

#[test]
fn text_lines_have_the_log_shape_and_colours_only_when_asked() {
    let captured = Captured::default();
    let writer = AccessWriter::new(LogFormat::Text, false, Box::new(captured.clone()));
    writer.queue(&fields("alice", 2_500), moment());
    writer.flush();
    assert_eq!(
        captured.text(),
        "2026-12-01T11:53:48.012345Z  INFO switchyard::access: request principal=\"alice\" session=\"0123abcd\" \
         method=\"tools/call\" tool=\"demo__echo\" backend=\"demo\" outcome=\"completed\" error_type=\"\" \
         status=200 duration_ms=2.500\n"
    );
    let coloured = Captured::default();
    let writer = AccessWriter::new(LogFormat::Text, true, Box::new(coloured.clone()));
    writer.queue(&fields("alice\nforged line", 0), moment());
    writer.flush();
    let text = coloured.text();
    assert!(text.contains("\x1b[32m INFO\x1b[0m"), "{text:?}");
    assert_eq!(text.lines().count(), 1, "a newline in a name cannot start a line: {text:?}");
}

#[test]
fn a_full_buffer_drops_lines_and_the_log_says_how_many() {
    let long = "p".repeat(1000);
    let captured = Captured::default();
    let writer = AccessWriter::new(LogFormat::Json, false, Box::new(captured.clone()));
    writer.queue(&fields(&long, 1), moment());
    writer.flush();
    let fits = CAPACITY / captured.text().len();
    captured.0.lock().clear();
    for _ in 0..fits + 100 {
        writer.queue(&fields(&long, 1), moment());
    }
    writer.flush();
    let text = captured.text();
    let (notice, lines) = text.split_once('\n').unwrap();
    let written = lines.lines().count();
    assert_eq!(written, fits, "of {}", fits + 100);
    assert_eq!(
        notice,
        format!("switchyard: {} access lines dropped (the log could not keep up)", fits + 100 - written)
    );
    writer.queue(&fields("after", 1), moment());
    writer.flush();
    assert!(captured.text().ends_with("\"target\":\"switchyard::access\"}\n"), "room again once written");
    assert_eq!(captured.text().matches("dropped").count(), 1, "each drop reported once");
}

#[test]
fn the_writer_thread_writes_without_a_flush() {
    let captured = Captured::default();
    let writer = AccessWriter::start(LogFormat::Json, false, Box::new(captured.clone()));
    writer.queue(&fields("alice", 1), SystemTime::now());
    for _ in 0..200 {
        if captured.text().contains("alice") {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("the writer thread wrote nothing");
}
