//! Codex's `config.toml`: setup's entries are one block between two marker comments, appended at
//! the end of the file and taken out whole, so that every other byte stays where it was.

use std::path::Path;

use mnemo::Error;

use super::{CODEX_EVENTS, Commands, HOOK_HOST_TIMEOUT_SECS};

/// The block's first line.
const BEGIN: &str = "# >>> mnemo setup (`mnemo setup codex --remove` takes this block out)";
/// Its last line.
const END: &str = "# <<< mnemo setup";

fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The block setup adds, its markers included, ending with a newline.
pub(super) fn block(commands: &Commands) -> String {
    let args: Vec<String> = commands.mcp_args.iter().map(|a| quoted(a)).collect();
    let mut out = format!(
        "{BEGIN}\n[mcp_servers.mnemo]\ncommand = {}\nargs = [{}]\n",
        quoted(&commands.program),
        args.join(", ")
    );
    for event in CODEX_EVENTS {
        out.push_str(&format!(
            "\n[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {}\ntimeout = {HOOK_HOST_TIMEOUT_SECS}\n",
            quoted(&commands.hook)
        ));
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// Where the block is in `text`: from its first marker's line to after its last marker's line.
fn find(text: &str) -> Option<std::ops::Range<usize>> {
    let start =
        text.match_indices(BEGIN).map(|(i, _)| i).find(|i| *i == 0 || text.as_bytes()[i - 1] == b'\n')?;
    let end_marker = text[start..].find(&format!("\n{END}"))? + start + 1;
    let end = text[end_marker..].find('\n').map_or(text.len(), |i| end_marker + i + 1);
    Some(start..end)
}

fn parse(path: &Path, text: &str, what: &str) -> anyhow::Result<toml::Table> {
    text.parse::<toml::Table>().map_err(|error| {
        Error::InvalidInput(format!("{}: {what} is not valid TOML ({error}); not touched", path.display()))
            .into()
    })
}

/// The file's text after adding (or taking out) the block; `None` to delete a file that held
/// nothing but the block.
pub(super) fn edit(
    path: &Path,
    text: Option<&str>,
    commands: &Commands,
    remove: bool,
) -> anyhow::Result<Option<String>> {
    let source = text.unwrap_or("");
    let table = parse(path, source, "the file")?;
    let found = find(source);
    if remove {
        let Some(range) = found else { return Ok(text.map(str::to_owned)) };
        // The blank line setup put before the block goes with it.
        let start = if source[..range.start].ends_with("\n\n") { range.start - 1 } else { range.start };
        let after = format!("{}{}", &source[..start], &source[range.end..]);
        parse(path, &after, "the file without mnemo's block")?;
        return Ok(if after.trim().is_empty() { None } else { Some(after) });
    }
    let ours = block(commands);
    if let Some(range) = found {
        if source[range.clone()] == ours {
            return Ok(text.map(str::to_owned));
        }
        anyhow::bail!(Error::InvalidInput(format!(
            "{}: mnemo's block there names another executable or store; `mnemo setup codex --remove` it first",
            path.display()
        )));
    }
    let servers = table.get("mcp_servers").and_then(toml::Value::as_table);
    if servers.is_some_and(|s| s.contains_key("mnemo")) {
        anyhow::bail!(Error::InvalidInput(format!(
            "{}: [mcp_servers.mnemo] is there and was not added by mnemo setup; remove or rename it first",
            path.display()
        )));
    }
    let separator = match source {
        "" => "",
        s if s.ends_with('\n') => "\n",
        _ => "\n\n",
    };
    let after = format!("{source}{separator}{ours}");
    parse(path, &after, "the file with mnemo's block added (its [hooks] may be written inline)")?;
    Ok(Some(after))
}
