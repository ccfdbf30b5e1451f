//! Reading a file as the checks need it: comments and literals out, test items out, and
//! every path it names (`crate::`, `super::`, `self::`, groups expanded).

/// The source without comments, with string and character literals emptied, so that only
/// code is searched for paths and braces.
pub fn lexed(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let (mut out, mut i) = (String::new(), 0);
    let at = |i: usize, s: &str| chars[i..].iter().take(s.len()).copied().eq(s.chars());
    while i < chars.len() {
        let c = chars[i];
        let after_word = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if !after_word && (at(i, "r#") || at(i, "r\"") || at(i, "br")) {
            // A raw string: r"…", r#"…"#, br"…"; anything else starting with r is a word.
            let start = i + if c == 'b' { 2 } else { 1 };
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            if chars.get(start + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain("#".repeat(hashes).chars())
                .collect();
            i = start + hashes + 1;
            while i < chars.len() && !at(i, &close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && char_literal_len(&chars[i..]).is_some() {
            i += char_literal_len(&chars[i..]).unwrap();
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The length of a character literal at the start of `chars` ('a', '\n', '\u{1F600}'), or
/// None for a lifetime.
pub fn char_literal_len(chars: &[char]) -> Option<usize> {
    match chars.get(1)? {
        '\\' => chars[2..].iter().position(|&c| c == '\'').map(|p| p + 3),
        _ => (chars.get(2) == Some(&'\'')).then_some(3),
    }
}

/// The code without its `#[cfg(test)]` items, and the names of the modules those declare as
/// files (`#[cfg(test)] mod tests;`), which are test code too.
pub fn without_tests(code: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let (mut kept, mut test_modules, mut rest) = (String::new(), Vec::new(), code);
    while let Some(at) = rest.find(MARK) {
        kept.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let end = item_end(item);
        let words: Vec<&str> = item[..end]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ';'))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(name) = words
            .iter()
            .position(|w| *w == "mod")
            .and_then(|p| words.get(p + 1))
            .and_then(|name| name.strip_suffix(';'))
        {
            test_modules.push(name.to_string());
        }
        rest = &item[end..];
    }
    kept.push_str(rest);
    (kept, test_modules)
}

/// Where the item at the start of `code` ends: after its closing brace, or after a `;`
/// outside braces.
pub fn item_end(code: &str) -> usize {
    let mut depth = 0;
    for (i, c) in code.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    code.len()
}

/// Every path starting with `crate`, `super` or `self`, groups expanded.
pub fn paths(code: &str) -> Vec<Vec<String>> {
    ["crate", "super", "self"]
        .iter()
        .flat_map(|head| paths_from(code, head))
        .collect()
}

/// Every path in `code` whose first segment is `head` and that has a second one.
pub fn paths_from(code: &str, head: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices(head) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + head.len()..];
        if rest.trim_start().starts_with("::") {
            found.extend(path_at(&code[at..]).into_iter().filter(|p| p.len() > 1));
        }
    }
    found
}

/// The path (or paths, for a `{…}` group) at the start of `code`.
pub fn path_at(code: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut rest = code;
    loop {
        let trimmed = rest.trim_start();
        let word = identifier(trimmed);
        if word.is_empty() {
            return vec![segments];
        }
        segments.push(word.to_string());
        rest = trimmed[word.len()..].trim_start();
        let Some(after) = rest.strip_prefix("::") else {
            return vec![segments];
        };
        rest = after.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| {
                    path_at(item)
                        .into_iter()
                        .map(|tail| segments.iter().cloned().chain(tail).collect::<Vec<_>>())
                })
                .collect();
        }
    }
}

/// The items of a `{…}` group, up to its closing brace.
pub fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

pub fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}
