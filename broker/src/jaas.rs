//! Kafka's `sasl.jaas.config` values: one JAAS login-module entry,
//! `<LoginModuleClass> <flag> key="value" key2=value2;`. Skein reads the
//! options (for PLAIN, the `user_<name>="<password>"` entries); the module
//! class and flag are checked for form only.

use std::collections::BTreeMap;

/// One parsed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

/// Parses one JAAS entry. Values are bare words or double-quoted strings
/// with backslash escapes; the entry ends with `;`.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut chars = text.trim().chars().peekable();
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut w = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                break;
            }
            w.push(c);
            chars.next();
        }
        w
    };
    let login_module = word(&mut chars);
    if login_module.is_empty() {
        return Err("no login module class".into());
    }
    let flag = word(&mut chars);
    if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
        return Err(format!(
            "'{flag}' after {login_module} is not a JAAS flag (required, requisite, sufficient, optional)"
        ));
    }
    let mut options = BTreeMap::new();
    loop {
        let key = word(&mut chars);
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if key.is_empty() {
            match chars.next() {
                Some(';') => break,
                Some(c) => return Err(format!("unexpected '{c}'")),
                None => return Err("the entry does not end with ';'".into()),
            }
        }
        if chars.next() != Some('=') {
            return Err(format!("option '{key}' has no '=value'"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let mut v = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => v.push(c),
                        None => return Err(format!("option '{key}': unterminated string")),
                    },
                    Some(c) => v.push(c),
                    None => return Err(format!("option '{key}': unterminated string")),
                }
            }
            v
        } else {
            let v = word(&mut chars);
            if v.is_empty() {
                return Err(format!("option '{key}' has an empty value"));
            }
            v
        };
        options.insert(key, value);
    }
    if chars.any(|c| !c.is_whitespace()) {
        return Err("more than one login module entry (Skein reads one)".into());
    }
    Ok(JaasEntry {
        login_module,
        flag,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plain_example_parses() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="al\"ice;=pw" user_bob=bob-pw;"#,
        )
        .unwrap();
        assert_eq!(
            e.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.flag, "required");
        assert_eq!(e.options["user_admin"], "admin-secret");
        assert_eq!(e.options["user_alice"], "al\"ice;=pw");
        assert_eq!(e.options["user_bob"], "bob-pw");
        assert_eq!(e.options.len(), 5);
    }

    #[test]
    fn malformed_entries_are_named() {
        for (text, why) in [
            ("", "no login module"),
            ("X required user_a=\"b\"", "does not end"),
            ("X maybe;", "not a JAAS flag"),
            ("X required user_a;", "has no '=value'"),
            ("X required user_a=\"b;", "unterminated"),
            ("X required a=b; Y required;", "more than one"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
