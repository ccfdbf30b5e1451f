//! Reading the docs the tests check: the shell blocks of a markdown file.

/// The `sh` blocks of a markdown file: (first line number, text), indented fences included
/// (a block inside a list item), the indentation removed.
pub fn sh_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, usize, String)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match &mut open {
            None if trimmed == "```sh" => open = Some((n + 2, indent, String::new())),
            Some((start, _, text)) if trimmed == "```" => {
                blocks.push((*start, std::mem::take(text)));
                open = None;
            }
            Some((_, indent, text)) => {
                text.push_str(line.get(*indent..).unwrap_or(trimmed));
                text.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "an unclosed ```sh block");
    blocks
}
