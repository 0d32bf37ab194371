//! Just enough PromQL to say which metrics and labels an expression names (for the dashboard check): metric names
//! with their label matchers, the labels of `by`/`without`/`on`/`ignoring` groupings, functions, numbers, strings,
//! ranges (`[5m]`, `[$__rate_interval]`) and dashboard variables. Anything it does not know is an error, so an
//! expression it cannot read fails the check rather than passing unread.

/// What one expression names.
#[derive(Debug, Default, PartialEq)]
pub struct Named {
    pub metrics: Vec<String>,
    /// Labels in matchers and groupings.
    pub labels: Vec<String>,
    /// `(label, operator, value)` of every matcher.
    pub matchers: Vec<(String, String, String)>,
}

const GROUPING: [&str; 4] = ["by", "without", "on", "ignoring"];
const KEYWORDS: [&str; 6] = ["and", "or", "unless", "bool", "group_left", "group_right"];
/// Aggregations may put their grouping before their parentheses (`sum by (le) (…)`).
const AGGREGATIONS: [&str; 12] =
    ["sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Name(String),
    Text(String),
    Number,
    Variable,
    Range,
    Punct(char),
    Operator,
}

pub fn scan(expression: &str) -> Result<Named, String> {
    let tokens = tokenize(expression)?;
    let mut named = Named::default();
    let mut index = 0;
    while index < tokens.len() {
        match &tokens[index] {
            Token::Name(name) if GROUPING.contains(&name.as_str()) => {
                index = labels_in_parentheses(&tokens, index + 1, &mut named.labels)?;
                continue;
            }
            Token::Name(name) if KEYWORDS.contains(&name.as_str()) || AGGREGATIONS.contains(&name.as_str()) => {}
            Token::Name(_) if tokens.get(index + 1) == Some(&Token::Punct('(')) => {}
            Token::Name(name) => named.metrics.push(name.clone()),
            Token::Punct('{') => {
                if !matches!(index.checked_sub(1).map(|before| &tokens[before]), Some(Token::Name(_))) {
                    return Err(format!("a selector without a metric name in {expression:?}"));
                }
                index = matchers(&tokens, index + 1, &mut named)?;
                continue;
            }
            _ => {}
        }
        index += 1;
    }
    Ok(named)
}

/// `( label, … )` from `at`; returns the index after `)`.
fn labels_in_parentheses(tokens: &[Token], at: usize, labels: &mut Vec<String>) -> Result<usize, String> {
    if tokens.get(at) != Some(&Token::Punct('(')) {
        return Err("a grouping without its label list".into());
    }
    let mut index = at + 1;
    loop {
        match tokens.get(index) {
            Some(Token::Name(label)) => labels.push(label.clone()),
            Some(Token::Punct(',')) => {}
            Some(Token::Punct(')')) => return Ok(index + 1),
            other => return Err(format!("unexpected {other:?} in a label list")),
        }
        index += 1;
    }
}

/// `label op "value", … }` from `at`; returns the index after `}`.
fn matchers(tokens: &[Token], at: usize, named: &mut Named) -> Result<usize, String> {
    let mut index = at;
    loop {
        match (tokens.get(index), tokens.get(index + 1), tokens.get(index + 2)) {
            (Some(Token::Punct('}')), _, _) => return Ok(index + 1),
            (Some(Token::Punct(',')), _, _) => index += 1,
            (Some(Token::Name(label)), Some(Token::Text(operator)), Some(Token::Text(value))) => {
                named.labels.push(label.clone());
                named.matchers.push((label.clone(), operator.clone(), value.clone()));
                index += 3;
            }
            other => return Err(format!("unexpected {other:?} in label matchers")),
        }
    }
}

fn tokenize(expression: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expression.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    let mut in_braces = false;
    while index < chars.len() {
        let c = chars[index];
        let rest = |from: usize| chars[from..].iter().collect::<String>();
        let token = match c {
            _ if c.is_whitespace() => {
                index += 1;
                continue;
            }
            'a'..='z' | 'A'..='Z' | '_' | ':' => {
                let end = scan_while(&chars, index, |c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
                let name = rest(index)[..end - index].to_owned();
                index = end;
                Token::Name(name)
            }
            '0'..='9' | '.' => {
                index = scan_while(&chars, index, |c| c.is_ascii_digit() || c == '.');
                Token::Number
            }
            '"' | '\'' => {
                let end = chars[index + 1..].iter().position(|&q| q == c).ok_or("an unterminated string")?;
                let text: String = chars[index + 1..index + 1 + end].iter().collect();
                index += end + 2;
                Token::Text(text)
            }
            '$' => {
                index = scan_while(&chars, index + 1, |c| c.is_ascii_alphanumeric() || "_{}".contains(c));
                Token::Variable
            }
            '[' => {
                let end = chars[index..].iter().position(|&close| close == ']').ok_or("an unterminated range")?;
                index += end + 1;
                Token::Range
            }
            '=' | '!' if in_braces => {
                let operator = if chars.get(index + 1).is_some_and(|&next| next == '=' || next == '~') {
                    rest(index)[..2].to_owned()
                } else if c == '=' {
                    "=".to_owned()
                } else {
                    return Err(format!("a bad matcher operator in {expression:?}"));
                };
                index += operator.len();
                Token::Text(operator)
            }
            '(' | ')' | ',' | '{' | '}' => {
                in_braces = match c {
                    '{' => true,
                    '}' => false,
                    _ => in_braces,
                };
                index += 1;
                Token::Punct(c)
            }
            '+' | '-' | '*' | '/' | '%' | '^' | '>' | '<' | '=' | '!' => {
                index = scan_while(&chars, index, |c| "+-*/%^><=!".contains(c));
                Token::Operator
            }
            other => return Err(format!("unexpected {other:?} in {expression:?}")),
        };
        tokens.push(token);
    }
    Ok(tokens)
}

fn scan_while(chars: &[char], from: usize, keep: impl Fn(char) -> bool) -> usize {
    from + chars[from..].iter().take_while(|&&c| keep(c)).count()
}

#[test]
fn metrics_labels_and_matchers_are_told_apart() {
    let named = scan(
        "histogram_quantile(0.99, sum by (le, backend) (rate(mcp_client_operation_duration_seconds_bucket\
         {backend=~\"$backend\", outcome!=\"x\"}[$__rate_interval]))) / on(backend) group_left up",
    )
    .expect("readable");
    assert_eq!(named.metrics, ["mcp_client_operation_duration_seconds_bucket", "up"]);
    assert_eq!(named.labels, ["le", "backend", "backend", "outcome", "backend"]);
    assert_eq!(named.matchers[0], ("backend".into(), "=~".into(), "$backend".into()));
    assert_eq!(named.matchers[1], ("outcome".into(), "!=".into(), "x".into()));
    assert!(scan("sum(rate({job=\"x\"}[5m]))").is_err(), "a selector without a name is refused");
    assert!(scan("rate(x[5m]) @ 1").is_err(), "what it cannot read is refused");
}
