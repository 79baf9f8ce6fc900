//! The subset of TOML a profile is written in: `key = value` lines whose
//! values are strings without escapes, unsigned integers, floats or
//! booleans, each optionally followed by a `#` comment. Section headers
//! are the profile parser's to interpret; this reads values and tables.

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value<'a> {
    Str(&'a str),
    Int(u64),
    Float(f64),
    Bool(bool),
}

/// A TOML value: "string" (no escapes: profiles never need them), an
/// unsigned integer, a float or a boolean, then an optional # comment.
pub(super) fn value(v: &str) -> Result<Value<'_>, String> {
    let v = v.trim();
    if let Some(rest) = v.strip_prefix('"') {
        let end = rest
            .find('"')
            .ok_or_else(|| "unterminated string".to_string())?;
        let tail = rest[end + 1..].trim();
        if !(tail.is_empty() || tail.starts_with('#')) {
            return Err("unexpected text after a string".to_string());
        }
        return Ok(Value::Str(&rest[..end]));
    }
    let v = v.split('#').next().unwrap_or("").trim();
    match v {
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        _ => v
            .parse::<u64>()
            .map(Value::Int)
            .or_else(|_| v.parse::<f64>().map(Value::Float))
            .map_err(|_| "a value that is not a string, number or boolean".to_string()),
    }
}

impl Value<'_> {
    /// The value's type, for messages (which never quote a file's text).
    fn kind(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
        }
    }
}

#[derive(Default)]
pub(super) struct Table<'a>(pub(super) Vec<(&'a str, Value<'a>)>);

impl<'a> Table<'a> {
    pub(super) fn has(&self, k: &str) -> bool {
        self.0.iter().any(|(key, _)| *key == k)
    }

    pub(super) fn get(&self, k: &str) -> Result<&Value<'a>, String> {
        self.0
            .iter()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| v)
            .ok_or_else(|| format!("missing '{k}'"))
    }

    pub(super) fn str(&self, k: &str) -> Result<&'a str, String> {
        match self.get(k)? {
            Value::Str(s) => Ok(*s),
            v => Err(format!("'{k}' should be a string, not {}", v.kind())),
        }
    }

    pub(super) fn int(&self, k: &str) -> Result<u64, String> {
        match self.get(k)? {
            Value::Int(n) => Ok(*n),
            v => Err(format!("'{k}' should be an integer, not {}", v.kind())),
        }
    }

    pub(super) fn float(&self, k: &str) -> Result<f64, String> {
        match self.get(k)? {
            Value::Float(f) => Ok(*f),
            Value::Int(n) => Ok(*n as f64),
            v => Err(format!("'{k}' should be a number, not {}", v.kind())),
        }
    }

    pub(super) fn bool(&self, k: &str) -> Result<bool, String> {
        match self.get(k)? {
            Value::Bool(b) => Ok(*b),
            v => Err(format!("'{k}' should be true or false, not {}", v.kind())),
        }
    }
}
