//! A reader for the YAML subset a Prometheus configuration uses, into JSON values: block mappings, block
//! sequences (also of mappings, `- key: value`), plain and quoted scalars, `[a, b]` flow lists and comments. No
//! anchors, tags, multi-line strings or flow mappings: such a file is refused, never half read. Tabs in
//! indentation are refused (YAML forbids them).

use serde_json::{Map, Value};

struct Line {
    indent: usize,
    text: String,
    number: usize,
}

pub fn parse(text: &str) -> Result<Value, String> {
    let mut lines = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let content = strip_comment(raw);
        if content.trim().is_empty() {
            continue;
        }
        let indent = content.len() - content.trim_start_matches(' ').len();
        if content[indent..].starts_with('\t') {
            return Err(format!("line {}: a tab in the indentation", number + 1));
        }
        lines.push(Line { indent, text: content.trim().to_owned(), number: number + 1 });
    }
    let mut at = 0;
    let value = block(&mut lines, &mut at, 0)?;
    match lines.get(at) {
        None => Ok(value),
        Some(line) => Err(format!("line {}: unexpected indentation", line.number)),
    }
}

/// The text before a `#` that starts a comment (outside quotes, at the start or after a blank).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (index, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            (None, '#') if index == 0 || line[..index].ends_with(' ') => return &line[..index],
            _ => {}
        }
    }
    line
}

fn block(lines: &mut [Line], at: &mut usize, indent: usize) -> Result<Value, String> {
    match lines.get(*at) {
        Some(line) if line.indent == indent && (line.text == "-" || line.text.starts_with("- ")) => {
            sequence(lines, at, indent)
        }
        Some(line) if line.indent == indent => mapping(lines, at, indent),
        Some(line) => Err(format!("line {}: expected indentation {indent}", line.number)),
        None => Ok(Value::Null),
    }
}

fn sequence(lines: &mut [Line], at: &mut usize, indent: usize) -> Result<Value, String> {
    let mut items = Vec::new();
    while let Some(line) = lines.get_mut(*at) {
        if line.indent != indent || !(line.text == "-" || line.text.starts_with("- ")) {
            break;
        }
        let rest = line.text[1..].trim_start().to_owned();
        if rest.is_empty() {
            *at += 1;
            let deeper = lines.get(*at).map_or(indent + 2, |next| next.indent);
            items.push(if deeper > indent { block(lines, at, deeper)? } else { Value::Null });
        } else if key_value(&rest).is_some() {
            // `- key: value` opens a mapping whose keys sit where `key` does.
            line.indent = indent + 2;
            line.text = rest;
            items.push(mapping(lines, at, indent + 2)?);
        } else {
            items.push(scalar(&rest)?);
            *at += 1;
        }
    }
    Ok(Value::Array(items))
}

fn mapping(lines: &mut [Line], at: &mut usize, indent: usize) -> Result<Value, String> {
    let mut map = Map::new();
    while let Some(line) = lines.get(*at) {
        if line.indent != indent {
            break;
        }
        let number = line.number;
        let (key, rest) = key_value(&line.text).ok_or_else(|| format!("line {number}: expected `key: value`"))?;
        let (key, rest) = (unquote(key), rest.to_owned());
        *at += 1;
        let value = if rest.is_empty() {
            match lines.get(*at) {
                Some(next) if next.indent > indent => {
                    let deeper = next.indent;
                    block(lines, at, deeper)?
                }
                Some(next) if next.indent == indent && next.text.starts_with("- ") => sequence(lines, at, indent)?,
                _ => Value::Null,
            }
        } else {
            scalar(&rest)?
        };
        if map.insert(key.clone(), value).is_some() {
            return Err(format!("line {number}: `{key}` appears twice"));
        }
    }
    Ok(Value::Object(map))
}

/// `key: value` or `key:`, split at the first `: ` (or a final `:`) outside quotes.
fn key_value(text: &str) -> Option<(&str, &str)> {
    if text.starts_with('"') || text.starts_with('\'') {
        let close = text[1..].find(&text[..1])? + 1;
        let rest = text[close + 1..].strip_prefix(':')?;
        return Some((&text[..=close], rest.trim()));
    }
    if let Some(key) = text.strip_suffix(':') {
        return (!key.contains(": ")).then_some((key, ""));
    }
    let (key, value) = text.split_once(": ")?;
    (!key.is_empty() && !key.contains(['[', '{', '"', '\''])).then_some((key, value.trim()))
}

fn unquote(text: &str) -> String {
    let quoted = text.len() >= 2
        && (text.starts_with('"') && text.ends_with('"') || text.starts_with('\'') && text.ends_with('\''));
    if quoted { text[1..text.len() - 1].to_owned() } else { text.to_owned() }
}

fn scalar(text: &str) -> Result<Value, String> {
    if let Some(inner) = text.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        let items = inner.split(',').map(str::trim).filter(|item| !item.is_empty());
        return items.map(scalar).collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if text.starts_with(['{', '&', '*', '!', '|', '>']) {
        return Err(format!("`{text}`: a YAML feature this reader does not take"));
    }
    if text.starts_with('"') || text.starts_with('\'') {
        return Ok(Value::String(unquote(text)));
    }
    Ok(match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" | "~" => Value::Null,
        _ => text.parse::<i64>().map_or_else(|_| Value::String(text.to_owned()), Value::from),
    })
}

#[test]
fn the_subset_is_read_and_the_rest_refused() {
    let text =
        "# top\na: 1\nb:\n  - x\n  - \"y # not a comment\"\nc:\n- k: v  # a comment\n  l: [1, 'two']\n-\n  - z\n";
    let value = parse(text).expect("readable");
    let expected =
        serde_json::json!({"a": 1, "b": ["x", "y # not a comment"], "c": [{"k": "v", "l": [1, "two"]}, ["z"]]});
    assert_eq!(value, expected);
    assert!(parse("a: 1\n  b: 2\n").is_err(), "bad indentation");
    assert!(parse("a: 1\na: 2\n").is_err(), "a repeated key");
    assert!(parse("a: &anchor 1\n").is_err(), "anchors");
    assert!(parse("a:\n\t- 1\n").is_err(), "tabs");
    assert!(parse("a: |\n  text\n").is_err(), "block scalars");
}
