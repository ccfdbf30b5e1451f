//! Reading `template.yaml` as the tests check it: by its text, section by section.

use std::collections::BTreeMap;

/// The template's `Globals` section: what every function gets unless it says otherwise.
pub fn globals(template: &str) -> &str {
    template
        .split("\nGlobals:\n")
        .nth(1)
        .and_then(|rest| rest.split("\nResources:\n").next())
        .expect("Globals")
}

/// Each resource's block of lines, by its logical id.
pub fn resources(template: &str) -> BTreeMap<String, String> {
    let mut blocks = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut inside = false;
    for line in template.lines() {
        if !line.starts_with(' ') && !line.trim().is_empty() && !line.starts_with('#') {
            inside = line.trim_end() == "Resources:";
            blocks.extend(current.take());
            continue;
        }
        if !inside {
            continue;
        }
        let name = line
            .strip_prefix("  ")
            .filter(|rest| !rest.starts_with(' ') && !rest.starts_with('#'))
            .and_then(|rest| rest.trim_end().strip_suffix(':'));
        match name {
            Some(name) => {
                blocks.extend(current.take());
                current = Some((name.to_string(), String::new()));
            }
            None => {
                if let Some((_, block)) = current.as_mut() {
                    block.push_str(line);
                    block.push('\n');
                }
            }
        }
    }
    blocks.extend(current);
    blocks
}
