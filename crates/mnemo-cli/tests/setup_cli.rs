//! `mnemo setup claude-code|codex` on temporary home directories: the change is shown before it is
//! written, the written configuration is what each host reads (Claude Code's `mcpServers` and hooks;
//! Codex's `[mcp_servers.NAME]` and inline `[[hooks.EVENT]]` tables), every byte setup did not add
//! stays as it was, `--remove` gives back the file byte for byte, and a file it cannot parse or an
//! entry it did not add is refused untouched.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::MNEMO;

fn setup(home: &Path, args: &[&str]) -> Output {
    Command::new(MNEMO)
        .arg("setup")
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .env_remove("MNEMO_STORE")
        .output()
        .unwrap()
}

fn ok(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).unwrap()
}

const SETTINGS: &str = r#"{
    "permissions": {
        "allow": ["Bash(ls:*)", "Bash(cargo test:*)"]
    },
    "hooks": {
        "Stop": [
            {
                "hooks": [
                    { "type": "command", "command": "notify-send done" }
                ]
            }
        ]
    },
    "model": "opus"
}
"#;

const CLAUDE_JSON: &str = r#"{"numStartups":12,"mcpServers":{"other":{"type":"stdio","command":"other-server","args":[]}},"projects":{"/src/a":{"mcpServers":{}}}}"#;

#[test]
fn claude_code_setup_is_shown_then_written_then_removed_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/settings.json"), SETTINGS).unwrap();
    std::fs::write(home.join(".claude.json"), CLAUDE_JSON).unwrap();

    // Shown, not written.
    let preview = ok(&setup(home, &["claude-code"]));
    assert!(
        preview.contains("+++ ") && preview.contains("hook claude-code") && preview.contains("--yes"),
        "{preview}"
    );
    assert_eq!(std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(), SETTINGS);
    assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), CLAUDE_JSON);

    ok(&setup(home, &["claude-code", "--yes"]));
    let settings_text = std::fs::read_to_string(home.join(".claude/settings.json")).unwrap();
    let settings: serde_json::Value = serde_json::from_str(&settings_text).unwrap();
    // The user's entries are untouched; setup's group follows the user's in `Stop`.
    assert_eq!(settings["permissions"]["allow"][1], "Bash(cargo test:*)");
    assert_eq!(settings["model"], "opus");
    assert_eq!(settings["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done");
    assert!(settings_text.starts_with(&SETTINGS[..SETTINGS.find("            }\n        ]").unwrap()]));
    let store = home.join(".mnemo").display().to_string();
    for (event, index) in
        [("SessionStart", 0), ("Stop", 1), ("SubagentStop", 0), ("PreCompact", 0), ("SessionEnd", 0)]
    {
        let hook = &settings["hooks"][event][index]["hooks"][0];
        assert_eq!(hook["type"], "command", "{event}");
        let command = hook["command"].as_str().unwrap();
        assert!(command.ends_with(&format!(" --store {store} hook claude-code")), "{command}");
        assert!(hook["timeout"].as_u64().unwrap() >= 2, "{event}");
    }
    let claude: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(claude["numStartups"], 12);
    assert_eq!(claude["mcpServers"]["other"]["command"], "other-server");
    let server = &claude["mcpServers"]["mnemo"];
    assert_eq!(server["type"], "stdio");
    assert_eq!(server["args"], serde_json::json!(["--store", store, "mcp"]));
    assert!(Path::new(server["command"].as_str().unwrap()).is_absolute());

    // The hook command as written runs, through a shell, as the host runs it, and fails open.
    let command = settings["hooks"]["Stop"][1]["hooks"][0]["command"].as_str().unwrap();
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdin.take());
    let ran = child.wait_with_output().unwrap();
    assert_eq!(ran.status.code(), Some(0));
    assert!(ran.stdout.is_empty());
    assert!(
        std::fs::read_to_string(home.join(".mnemo/hooks.log")).unwrap().contains("not the host's hook JSON")
    );

    // A second run changes nothing; --remove gives back both files byte for byte.
    let again = ok(&setup(home, &["claude-code", "--yes"]));
    assert!(again.contains("already set up"), "{again}");
    ok(&setup(home, &["claude-code", "--remove", "--yes"]));
    assert_eq!(std::fs::read_to_string(home.join(".claude/settings.json")).unwrap(), SETTINGS);
    assert_eq!(std::fs::read_to_string(home.join(".claude.json")).unwrap(), CLAUDE_JSON);
    let nothing = ok(&setup(home, &["claude-code", "--remove", "--yes"]));
    assert!(nothing.contains("nothing to change"), "{nothing}");
}

#[test]
fn setup_creates_missing_files_and_remove_deletes_them_again() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    ok(&setup(home, &["claude-code", "--yes"]));
    ok(&setup(home, &["codex", "--yes"]));
    for file in [".claude/settings.json", ".claude.json", ".codex/config.toml"] {
        assert!(home.join(file).is_file(), "{file}");
    }
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(settings["hooks"].as_object().unwrap().len(), 5);
    ok(&setup(home, &["claude-code", "--remove", "--yes"]));
    ok(&setup(home, &["codex", "--remove", "--yes"]));
    for file in [".claude/settings.json", ".claude.json", ".codex/config.toml"] {
        assert!(!home.join(file).exists(), "{file} is left");
    }
}

const CONFIG_TOML: &str = r#"# my Codex settings
model = "gpt-5.1-codex"   # the default model
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "0"]

[[hooks.Stop]]
[[hooks.Stop.hooks]]
type = "command"
command = "notify-send done"
"#;

#[test]
fn codex_setup_appends_one_block_and_remove_takes_exactly_it_out() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let path = home.join(".codex/config.toml");
    std::fs::write(&path, CONFIG_TOML).unwrap();

    let preview = ok(&setup(home, &["codex"]));
    assert!(preview.contains("+[mcp_servers.mnemo]"), "{preview}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), CONFIG_TOML);

    ok(&setup(home, &["codex", "--yes"]));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with(CONFIG_TOML), "the user's lines changed");
    let config: toml::Table = text.parse().unwrap();
    assert_eq!(config["model"].as_str(), Some("gpt-5.1-codex"));
    assert_eq!(config["mcp_servers"]["docs"]["command"].as_str(), Some("docs-server"));
    let store = home.join(".mnemo").display().to_string();
    let server = &config["mcp_servers"]["mnemo"];
    assert_eq!(
        server["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect::<Vec<_>>(),
        ["--store", store.as_str(), "mcp"]
    );
    let hooks = config["hooks"].as_table().unwrap();
    assert_eq!(hooks["Stop"].as_array().unwrap().len(), 2, "the user's Stop hook and setup's");
    for event in ["SessionStart", "Stop", "PreCompact"] {
        let group = hooks[event].as_array().unwrap().last().unwrap();
        let hook = &group["hooks"].as_array().unwrap()[0];
        assert_eq!(hook["type"].as_str(), Some("command"));
        assert!(hook["command"].as_str().unwrap().ends_with(&format!(" --store {store} hook codex")));
    }
    assert!(ok(&setup(home, &["codex", "--yes"])).contains("already set up"));
    ok(&setup(home, &["codex", "--remove", "--yes"]));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), CONFIG_TOML);
}

#[test]
fn a_file_setup_cannot_parse_or_an_entry_it_did_not_add_is_refused_untouched() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let cases: [(&str, &str, &str, &str); 5] = [
        ("codex", ".codex/config.toml", "model = [\n", "not valid TOML"),
        (
            "codex",
            ".codex/config.toml",
            "[mcp_servers.mnemo]\ncommand = \"mine\"\n",
            "not added by mnemo setup",
        ),
        ("codex", ".codex/config.toml", "[hooks]\nStop = []\n", "not valid TOML"),
        ("claude-code", ".claude/settings.json", "{\"hooks\": {\"Stop\": [}\n", "not valid JSON"),
        (
            "claude-code",
            ".claude.json",
            "{\"mcpServers\": {\"mnemo\": {\"command\": \"npx\", \"args\": [\"mnemo-other\"]}}}",
            "not added by mnemo setup",
        ),
    ];
    for (host, file, text, why) in cases {
        std::fs::write(home.join(file), text).unwrap();
        let output = setup(home, &[host, "--yes"]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{file}: {stderr}");
        assert!(stderr.contains(why) && stderr.contains(file), "{file}: {stderr}");
        assert_eq!(std::fs::read_to_string(home.join(file)).unwrap(), text, "{file} was touched");
        std::fs::remove_file(home.join(file)).unwrap();
    }
}

#[test]
fn print_shows_the_configuration_and_touches_nothing() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let printed = ok(&setup(home, &["claude-code", "--print"]));
    assert!(printed.contains("\"mcpServers\"") && printed.contains("\"SessionStart\""), "{printed}");
    let printed = ok(&setup(home, &["codex", "--print"]));
    let toml_part: String =
        printed.lines().filter(|l| !l.starts_with("# /")).map(|l| format!("{l}\n")).collect();
    let config: toml::Table = toml_part.parse().unwrap();
    assert!(config["mcp_servers"]["mnemo"].is_table());
    assert_eq!(std::fs::read_dir(home).unwrap().count(), 0);
}
